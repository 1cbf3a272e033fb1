"""recycle-train --script-head's refusals: one line each, the cause in the head's own words."""
import pytest
import torch

import recycle
from conftest import run_tool


class IntHead(torch.nn.Module):
    """Returns int64 "logits": the loss could not take a gradient through them."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.fc(x.flatten(1)).long()


class RaisingHead(torch.nn.Module):
    """Raises its author's own message."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 3)

    def forward(self, x):
        if x.dim() == 4:
            raise ValueError("this head wants pooled features, not feature maps")
        return self.fc(x)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("script-head")
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(40, 1, 4, 4, generator=g),
                                          torch.arange(40) % 3)
    net = torch.nn.Conv2d(1, 2, 3, padding=1)
    recycle.build(root / "c", data, net, classes=["a", "b", "c"], model_id="conv", codec="fp32",
                  progress=False)
    return root


@pytest.mark.parametrize("module, says", [
    (IntHead(), "returns int64 from the cache's activations 2x2x4x4: it must return "
                "floating-point logits"),
    (RaisingHead(), "this head wants pooled features, not feature maps"),
])
def test_a_script_head_that_cannot_train_is_refused_in_its_own_words(cache, module, says):
    path = cache / f"{type(module).__name__}.pt"
    torch.jit.script(module).save(str(path))
    r = run_tool("recycle-train", "--cache", cache / "c", "--script-head", path, "--epochs", 1,
                 check=False)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert says in r.stderr, r.stderr
    assert "does not require grad" not in r.stderr
