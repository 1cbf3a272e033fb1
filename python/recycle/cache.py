"""recycle.inspect and recycle.verify: what recycle-inspect [--verify] --json prints."""
import json

from . import _native, _tensors
from ._native import CorruptRecordError


def inspect(path):
    """The cache's manifest, counts and bytes as a dict (recycle-inspect --json's object)."""
    return json.loads(_native.inspect(_tensors.cache_dir(path), False))


def verify(path, raise_on_error=True):
    """Reads and checks every record (header, checksum, layout) and every file's checksums, as
    recycle-inspect --verify does. Returns the report (a dict with "checked", "corrupt",
    "problems", and "repair": what to do about damaged records, which verify notes in the cache
    so that the next recycle.build of their split computes them again); raises CorruptRecordError naming the first problem when there is one, unless
    raise_on_error is False: then a cache that cannot be opened at all gives a report with "ok"
    False and the reason as its one problem."""
    path = _tensors.cache_dir(path)
    try:
        report = json.loads(_native.inspect(path, True))
    except (RuntimeError, ValueError, OSError) as e:  # not a cache, missing, unreadable
        if raise_on_error:
            raise
        return {"cache": path, "checked": 0, "corrupt": 0, "damaged_files": 0,
                "problems": [str(e)], "ok": False}
    report["ok"] = not report.get("problems")
    if raise_on_error and not report["ok"]:
        problems = report["problems"]
        repair = f"; {report['repair']}" if report.get("repair") else ""
        raise CorruptRecordError(
            f"cache {path}: {len(problems)} problem(s), the first: {problems[0]}{repair}")
    return report
