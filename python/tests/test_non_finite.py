"""recycle.build refuses a prefix whose output is not finite in every codec, fp32 included (issue
54: fp32 stored NaN and infinities, verify called the cache clean and training blamed --lr)."""
import pytest
import torch

import recycle


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n=40):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn((n, 1, 6, 6), generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


def poisoned(value, row):
    """A prefix that doubles its input and puts `value` into the output of the input equal to
    sample `row` (found by content: the build may call it on other batches first)."""
    target = Pairs().x[row].flatten()

    def prefix(x):
        out = x * 2
        hit = (x.flatten(1) == target).all(1)
        out[hit, 0, 1, 2] = value
        return out

    return prefix


@pytest.mark.parametrize("codec", ["fp32", "fp16", "bf16", "int8"])
@pytest.mark.parametrize("value,name", [(float("nan"), "NaN"), (float("inf"), "inf"),
                                        (float("-inf"), "-inf")])
def test_a_prefix_output_that_is_not_finite_is_refused_naming_the_sample(tmp_path, codec, value,
                                                                          name):
    with pytest.raises(ValueError) as e:
        recycle.build(tmp_path / "c", Pairs(), poisoned(value, 23), model_id="p", codec=codec,
                      batch_size=16)
    what = str(e.value)
    assert "\n" not in what
    assert "sample at position 23: tensor 'activation': " + codec + " codec: value 8 of 36" in what
    assert (" is " + name + "; no codec stores values that are not finite: the prefix's output "
            "is not finite") in what
    # What was stored before it is finite, and verifies.
    if (tmp_path / "c").exists():
        assert recycle.verify(tmp_path / "c")["corrupt"] == 0


def test_a_dict_output_names_its_tensor(tmp_path):
    target = Pairs().x[15].flatten()

    def prefix(x):
        hidden = x.flatten(1).clone()
        hidden[(hidden == target).all(1), 3] = float("nan")
        return {"pooled": x.mean((1, 2, 3)).unsqueeze(1), "hidden": hidden}

    with pytest.raises(ValueError, match=r"sample at position 15: tensor 'hidden': fp32 codec: "
                                         r"value 3 of 36 is NaN; no codec stores"):
        recycle.build(tmp_path / "c", Pairs(), prefix, model_id="d", codec="fp32", batch_size=16)
