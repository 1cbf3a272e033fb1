"""bench/gpu_bench.py, the device check's benchmark (docs/gpu.md), kept from rotting between GPU
sessions: its text row on the CPU with --quick sizes, against this build's tools."""
import json
import subprocess
import sys

from conftest import SOURCE, TOOLS, tool


def test_the_device_benchmark_runs_its_text_row_on_the_cpu(tmp_path):
    tool("recycle-build")  # skips where the tools are not built
    tools = str(TOOLS)
    r = subprocess.run([sys.executable, str(SOURCE / "bench" / "gpu_bench.py"), "--tools", tools,
                        "--device", "cpu", "--quick", "--tasks", "text", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| text | 64 |" in r.stdout, r.stdout
    row = json.loads((tmp_path / "gpu_bench.json").read_text())["rows"][0]
    assert row["task"] == "text" and row["samples"] == 64 and row["gpu_busy_pct"] is None
    for key in ("build_per_s", "prefix_per_s", "disk_mb_per_s", "epoch_cached_s", "epoch_full_s",
                "epoch_online_s", "vs_full", "vs_online"):
        assert row[key] > 0, (key, row)
