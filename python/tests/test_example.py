"""examples/finetune_resnet18.py runs alone and under torchrun with 2 processes
(DistributedSampler, DDP over Gloo), and the two train to about the same accuracy."""
import json
import subprocess
import sys

from conftest import SOURCE, torchrun

EXAMPLE = SOURCE / "examples" / "finetune_resnet18.py"
ARGS = ["--train", "3000", "--test", "1000", "--epochs", "3", "--width", "8", "--skip-baseline",
        "--bench-epochs", "1"]


def run(cmd, tmp_path, name):
    out = tmp_path / f"{name}.json"
    r = subprocess.run(cmd + [str(EXAMPLE), *ARGS, "--cache", str(tmp_path / name), "--json", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(out.read_text()), r.stdout


def test_the_example_alone_and_with_ddp_on_two_processes(tmp_path):
    alone, _ = run([sys.executable], tmp_path, "alone")
    ddp, stdout = run(torchrun(2), tmp_path, "ddp")
    assert alone["world"] == 1 and ddp["world"] == 2
    # Rank 0 alone reports the build, which counts every rank's samples.
    assert stdout.count("build train: 3000 samples, 3000 computed") == 1, stdout[-2000:]
    for name in ("CachedDataset + DataLoader", "CachedLoader"):
        a, d = alone["runs"][name]["test_acc"], ddp["runs"][name]["test_acc"]
        # Ten classes: chance is 0.1. The runs differ only in the order of the samples and
        # where gradients are summed; 3 epochs of 3,000 samples reach about 0.7.
        assert a > 0.5 and d > 0.5, (name, a, d)
        assert abs(a - d) <= 0.1, (name, a, d)
    # Inference through CachedPrefix: the cached test images are hits, the flipped ones misses;
    # both predict what the full model predicts (fp16 records may flip a near tie).
    infer = alone["inference"]
    assert infer["hits_per_pass"] == 1000 and infer["misses_per_pass"] == 1000
    assert infer["CachedPrefix, all hits"]["same_class"] >= 995
    assert infer["CachedPrefix, all misses"]["same_class"] == 1000
