"""What a build reports as it goes: a progress line on stderr, and the prefix's share of the
forward time (the head timed on a few batches)."""
import math
import os
import sys
import time

import torch

from . import _identity, _records


class ShareTimer:
    """The prefix's share of the forward time: the head timed on up to 64 outputs of the first two
    batches the prefix computed (the second's figure kept: the first pays one-time costs)."""

    def __init__(self, head):
        self.head, self.batches, self.share = head, 0, None

    def measure(self, raw, rows, prefix_seconds):
        if self.head is None or self.batches >= 2 or rows < 2:  # rows 1: the layout probe
            return
        self.batches += 1
        k = min(rows, 64)
        sample = _records.first_rows(raw, k)
        _, restore = _identity.eval_mode(self.head)
        try:
            with torch.no_grad():
                start = time.perf_counter()
                result = self.head(sample)
                if isinstance(result, torch.Tensor) and result.is_cuda:
                    torch.cuda.synchronize(result.device)
                head_seconds = time.perf_counter() - start
        finally:
            restore()
        per_prefix, per_head = prefix_seconds / rows, head_seconds / k
        if per_prefix + per_head > 0:
            self.share = per_prefix / (per_prefix + per_head)

    def report(self):
        if self.share is None:
            return {}
        s = self.share
        rest = max(1.0 - s, 1e-9)
        return {"prefix_share": s, "expected_speedup_vs_full": 1.0 / rest,
                "expected_speedup_vs_online": (s + 3 * rest) / (3 * rest)}


def plain_interval():
    """Seconds between plain progress lines: RECYCLE_PROGRESS_SECONDS (default 30; 0: none)."""
    try:
        s = float(os.environ.get("RECYCLE_PROGRESS_SECONDS", "30"))
    except ValueError:
        return 30.0
    return max(s, 0.0) if math.isfinite(s) else 30.0


class Progress:
    """Progress on stderr. mode "bar": one line redrawn at most 4 times a second, "build SPLIT:
    DONE/TOTAL samples (P%)", ended with the time taken; "lines" (stderr not a terminal: nohup, a
    pipe, a scheduler's log): a plain line every RECYCLE_PROGRESS_SECONDS (default 30), with the
    rate and ETA, and a last one when any was printed; None: nothing."""

    def __init__(self, label, total, mode):
        self.label, self.total, self.mode = label, total, mode
        self.every = plain_interval() if mode == "lines" else 0.0
        self.printed = False
        self.done, self.start = 0, time.perf_counter()
        self.last = 0.0 if mode == "bar" else self.start

    def advance(self, n):
        self.done += n
        now = time.perf_counter()
        if self.mode == "bar" and now - self.last >= 0.25:
            self.last = now
            self._draw("")
        elif self.mode == "lines" and self.every > 0 and now - self.last >= self.every:
            self.last = now
            self._line(False)

    def finish(self):
        if self.mode == "bar":
            self._draw(f" in {time.perf_counter() - self.start:.1f} s\n")
        elif self.printed:
            self._line(True)

    def _line(self, final):
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        percent = 100 * self.done // max(self.total, 1)
        tail = (f"done in {elapsed:.1f} s" if final else
                f"ETA {(self.total - self.done) / rate:.0f} s" if rate > 0 else "ETA --")
        sys.stderr.write(f"{self.label}: {self.done}/{self.total} samples ({percent}%), "
                         f"{rate:.0f} samples/s, {tail}\n")
        sys.stderr.flush()
        self.printed = True

    def _draw(self, end):
        percent = 100 * self.done // max(self.total, 1)
        sys.stderr.write(f"\r{self.label}: {self.done}/{self.total} samples ({percent}%){end}")
        sys.stderr.flush()
