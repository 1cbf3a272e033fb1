"""bench/peers/composer_peer.py, the Composer side of recycle-bench --progressive
--composer-python (docs/progressive.md): its replica loads the engine's own weights file, name for
name, and replaces the classifier as recycle-train does. Composer itself lives in its own
environment (bench/peers/composer_venv.sh); what is tested here needs torch alone."""
import sys

import pytest

from conftest import SOURCE, run_tool

torch = pytest.importorskip("torch")
sys.path.insert(0, str(SOURCE / "bench" / "peers"))
import composer_peer  # noqa: E402
import eager_peer  # noqa: E402


def test_the_replica_loads_the_engines_weights_and_replaces_a_classifier_of_other_classes(tmp_path):
    weights = tmp_path / "encoder.pt"
    run_tool("recycle-train", "--data", "fashion-mnist", "--classes", "0-4", "--limit", "64",
             "--recycle", "0", "--epochs", "1", "--threads", "1", "--eval-split", "none",
             "--save-model", weights)
    tensors, metadata = composer_peer.read_engine_weights(str(weights))
    names = eager_peer.FASHION_MNIST_NAMES

    same, kept = composer_peer.build_net(torch, list(range(5)), str(weights), names[:5])
    assert kept
    state = same.state_dict()
    assert set(state) == set(tensors)  # every tensor of the file, and nothing else
    for name, value in tensors.items():
        assert torch.equal(state[name], torch.from_numpy(value)), name

    torch.manual_seed(0)
    other, kept = composer_peer.build_net(torch, list(range(5, 10)), str(weights), names[5:])
    assert not kept
    assert torch.equal(other.layer4_1.conv2.weight, torch.from_numpy(tensors["layer4_1.conv2.weight"]))
    assert not torch.equal(other.fc.fc.weight, torch.from_numpy(tensors["fc.fc.weight"]))
    other.eval()
    assert other(torch.zeros(2, 1, 28, 28)).shape == (2, 5)


def test_a_file_that_is_not_safetensors_is_one_error(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{nope")
    with pytest.raises(eager_peer.PeerError, match="not a safetensors file"):
        composer_peer.read_engine_weights(str(bad))
