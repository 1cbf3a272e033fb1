#!/usr/bin/python3
"""Summarises Chrome traces of training epochs from LibTorch's legacy autograd profiler
(`recycle-train --profile FILE`, `bench/peers/eager_peer.py --profile DIR`) side by side, as
Markdown tables of milliseconds per training step:

  phases  the step scopes (step.load, step.forward, step.backward, step.after_backward,
          step.optimizer; engine/train/trainer.h), inclusive time;
  ops     every op and autograd node by self time (its time minus the events nested in it on
          the same thread), the --top largest by the larger of the traces.

Usage: bench/profile_table.py [--top N] NAME=TRACE.json [NAME=TRACE.json ...]
The first trace is the reference of the ratio columns (other / first).
"""

import argparse
import collections
import json
import sys

PHASES = ["step.load", "step.forward", "step.backward", "step.after_backward", "step.optimizer"]


def load_events(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit("profile_table.py: cannot read %s: %s" % (path, e))
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # The legacy writer may leave a trailing comma before the closing bracket.
        data = json.loads(text.rstrip().rstrip("]").rstrip().rstrip(",") + "]")
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    return [e for e in data if e.get("ph") == "X" and "dur" in e]


def summarise(events):
    """(steps, inclusive us by phase, self us by name, wall us of the steps)."""
    by_tid = collections.defaultdict(list)
    for e in events:
        by_tid[e.get("tid")].append(e)
    self_us = collections.Counter()
    phase_us = collections.Counter()
    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack = []  # (end, name)
        for e in evs:
            ts, dur, name = float(e["ts"]), float(e["dur"]), e["name"]
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack:
                self_us[stack[-1][1]] -= dur
            self_us[name] += dur
            if name in PHASES:
                phase_us[name] += dur
            stack.append((ts + dur, name))
    for p in PHASES:  # scopes are not ops: their self time is the time between ops
        if p in self_us:
            self_us["(between ops, " + p + ")"] = self_us.pop(p)
    steps = sum(1 for e in events if e["name"] == "step.forward")
    starts = [float(e["ts"]) for e in events if e["name"] == "step.load"]
    ends = [float(e["ts"]) + float(e["dur"]) for e in events if e["name"] in PHASES]
    wall = (max(ends) - min(starts)) if starts and ends else 0.0
    return steps, phase_us, self_us, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="ops to list (default: 25)")
    parser.add_argument("traces", nargs="+", metavar="NAME=TRACE.json")
    args = parser.parse_args()
    runs = []
    for spec in args.traces:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            sys.exit("profile_table.py: expected NAME=TRACE.json, got '%s'" % spec)
        steps, phases, ops, wall = summarise(load_events(path))
        if steps == 0:
            sys.exit("profile_table.py: %s has no step.forward scope (not a training epoch trace?)" % path)
        runs.append((name, steps, phases, ops, wall))

    def ms(us, steps):
        return us / steps / 1000.0

    def row(label, values):
        cells = ["%.3f" % v for v in values]
        ref = values[0]
        for v in values[1:]:
            cells.append("%.2f" % (v / ref) if ref > 0 else "-")
        return "| " + label + " | " + " | ".join(cells) + " |"

    names = [r[0] for r in runs]
    head = "| %s | " + " | ".join(n + " ms/step" for n in names) + "".join(
        " | %s / %s" % (n, names[0]) for n in names[1:]) + " |"
    rule = "|---" * (1 + len(names) + len(names) - 1) + "|"

    print("Steps profiled: " + ", ".join("%s %d" % (r[0], r[1]) for r in runs) + "\n")
    print(head % "phase (inclusive)")
    print(rule)
    for p in PHASES:
        if any(r[2].get(p) for r in runs):
            print(row(p, [ms(r[2].get(p, 0.0), r[1]) for r in runs]))
    print(row("**step, first load to last phase end**", [ms(r[4], r[1]) for r in runs]))
    print()
    print(head % "op (self time)")
    print(rule)
    every = set()
    for r in runs:
        every.update(r[3])
    ranked = sorted(every, key=lambda k: -max(ms(r[3].get(k, 0.0), r[1]) for r in runs))
    shown = ranked[:args.top]
    for k in shown:
        print(row("`" + k + "`", [ms(r[3].get(k, 0.0), r[1]) for r in runs]))
    rest = [sum(ms(r[3].get(k, 0.0), r[1]) for k in ranked[args.top:]) for r in runs]
    print(row("(%d other ops)" % max(0, len(ranked) - args.top), rest))


if __name__ == "__main__":
    main()
