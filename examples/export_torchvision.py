#!/usr/bin/python3
"""Export a torchvision ResNet as a scripted nn.Sequential that `--model torchscript:FILE` loads.

    /usr/bin/python3 examples/export_torchvision.py OUT.ts [--arch resnet18] [--in-channels 1]
        [--num-classes 10] [--state-dict FILE] [--seed 0]

Needs Debian's python3-torchvision (`bash scripts/setup.sh torchscript` installs it). The file
holds an nn.Sequential whose named children are torchvision's, in the order its forward runs
them, with an explicit nn.Flatten before the classifier (torchvision's forward calls
torch.flatten there, which a Sequential cannot):

    conv1, bn1, relu, maxpool, layer1, layer2, layer3, layer4, avgpool, flatten, fc

The engine sees 4 blocks (layer1 with the stem, layer2, layer3, layer4 with avgpool and
flatten) and the classifier fc: see docs/torchscript.md.

--in-channels N replaces conv1 by a convolution of N input channels (same kernel, stride and
padding; Fashion-MNIST has 1). With --state-dict (a state dict saved by torch.save, e.g.
pretrained ImageNet weights fetched elsewhere) the weights are loaded first; a 3-channel conv1
is then summed over its input channels for a 1-channel stem. Without it the weights are
torchvision's random initialisation, drawn from --seed.

Before saving, the script checks that the Sequential gives the same output as the torchvision
model in eval mode, and that the saved file loads and gives it again.

Under torch >= 2.6, an OUT ending in .pt2 writes the frozen prefix alone as an AOTInductor
package (recycle.export, with a dynamic batch) that `--model pt2:OUT` loads: the children up to
and including --until (default layer3), for inputs of --in-channels x --size x --size:

    python examples/export_torchvision.py prefix.pt2 --in-channels 1 --until layer3
"""
import argparse
import collections
import sys

import torch
import torchvision


def build(args):
    torch.manual_seed(args.seed)
    make = getattr(torchvision.models, args.arch, None)
    if make is None or not args.arch.startswith("resnet"):
        sys.exit(f"export_torchvision: --arch {args.arch}: expected a torchvision ResNet "
                 "(resnet18, resnet34, resnet50, ...)")
    model = make(weights=None)
    if args.state_dict:
        model.load_state_dict(torch.load(args.state_dict, map_location="cpu"))
    if args.in_channels != model.conv1.in_channels:
        old = model.conv1
        conv = torch.nn.Conv2d(args.in_channels, old.out_channels, old.kernel_size, old.stride,
                               old.padding, bias=False)
        if args.state_dict and args.in_channels == 1:
            with torch.no_grad():
                conv.weight.copy_(old.weight.sum(dim=1, keepdim=True))
        model.conv1 = conv
    if args.num_classes != model.fc.out_features:
        model.fc = torch.nn.Linear(model.fc.in_features, args.num_classes)
    children = []
    for name, child in model.named_children():
        if name == "fc":
            children.append(("flatten", torch.nn.Flatten(1)))
        children.append((name, child))
    return model, torch.nn.Sequential(collections.OrderedDict(children))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out",
                   help="the TorchScript file to write, or OUT.pt2: the prefix's package")
    p.add_argument("--arch", default="resnet18", help="a torchvision ResNet (default resnet18)")
    p.add_argument("--in-channels", type=int, default=3,
                   help="input channels of the stem (1 for Fashion-MNIST; default 3)")
    p.add_argument("--num-classes", type=int, default=1000, help="outputs of fc (default 1000)")
    p.add_argument("--state-dict",
                   help="weights for the torchvision model (torch.save'd state dict)")
    p.add_argument("--seed", type=int, default=0, help="initialisation seed without --state-dict")
    p.add_argument("--size", type=int, default=28,
                   help="input height and width of the check and of a package (28)")
    p.add_argument("--until", default="layer3",
                   help="OUT.pt2: the last child in the prefix's package (default layer3)")
    args = p.parse_args()
    if args.in_channels < 1 or args.num_classes < 1:
        sys.exit("export_torchvision: --in-channels and --num-classes must be positive")
    model, seq = build(args)
    model.eval()
    seq.eval()
    x = torch.randn(4, args.in_channels, args.size, args.size)
    with torch.no_grad():
        want = model(x)
        if not torch.allclose(seq(x), want, atol=1e-5):
            sys.exit("export_torchvision: the Sequential does not compute what the model does")
        if args.out.endswith(".pt2"):
            return export_prefix(args, seq, x)
        scripted = torch.jit.script(seq)
        scripted.save(args.out)
        again = torch.jit.load(args.out)
        again.eval()
        if not torch.allclose(again(x), want, atol=1e-5):
            sys.exit("export_torchvision: the saved file does not compute what the model does")
    params = sum(t.numel() for t in seq.parameters())
    print(f"wrote {args.out}: {args.arch}, {args.in_channels} input channel(s), "
          f"{args.num_classes} classes, {params} parameters; children: "
          + ", ".join(name for name, _ in seq.named_children()))


def export_prefix(args, seq, x):
    """Writes the children of seq up to args.until to args.out as an AOTInductor package."""
    import recycle  # under torch >= 2.6, the package of this torch (docs/pytorch2.md)
    names = [name for name, _ in seq.named_children()]
    if args.until not in names:
        sys.exit(f"export_torchvision: --until {args.until}: expected one of {', '.join(names)}")
    prefix = seq[:names.index(args.until) + 1]
    recycle.export(prefix, (x,), args.out)
    got, want = torch._inductor.aoti_load_package(args.out)(x), prefix(x)
    if (got - want).abs().max() > 1e-4 * max(1.0, want.abs().max().item()):
        sys.exit("export_torchvision: the package does not compute what the prefix does (largest "
                 f"difference {(got - want).abs().max().item():.3g})")
    print(f"wrote {args.out}: {args.arch} up to {args.until}, {args.in_channels} input "
          f"channel(s), {args.size}x{args.size} inputs, any batch; children: "
          + ", ".join(names[:names.index(args.until) + 1]))


if __name__ == "__main__":
    main()
