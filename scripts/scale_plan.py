#!/usr/bin/python3
"""The plan of docs/scale-plan.md: ImageNet through ResNet-50 cut after layer2, and a 1M-text
task through BERT-base cut after layer 6 of 12, on 8, 64 and 512 ranks. Prints the document:

    /usr/bin/python3 scripts/scale_plan.py [--measured LARGE_JSON] > docs/scale-plan.md

(torch on the CPU, no torchvision). Every number of the document comes out of this script: the
published figures it starts from are the constants of PUBLISHED below, each with its source; this
machine's figures are those of `recycle-bench --large` (its large.json, given with --measured;
without it, those of the run docs/scale.md records). Units: GB = 1e9 bytes, GMAC = 1e9
multiply-accumulates (1 MAC = 2 FLOPs).
"""
import math
import os
import sys

import torch
import torch.nn as nn

torch.set_num_threads(1)

# --------------------------------------------------------------------------------------------
# Inputs: the workloads (issue text) and stated assumptions
# --------------------------------------------------------------------------------------------
RANKS = [8, 64, 512]
IMAGENET_TRAIN = 1_281_167
TEXTS = 1_000_000
HEADER = 32                # bytes of a record's header and checksum: 100,384 - 100,352 in large.json
FP16 = 2                   # bytes a value
BERT_H, BERT_FF, BERT_LAYERS, BERT_K, BERT_L = 768, 3072, 12, 6, 128
L_MED = 40                 # ASSUMED median text length in tokens (and used as the mean: placeholder)
BERT_CLASSES = 2           # ASSUMED classifier width (negligible in the counts)
TORCHVISION_RN50_GFLOPS = 4.09        # torchvision docs, ResNet50_Weights.IMAGENET1K_V1 "GFLOPS 4.09" (= GMACs)
TORCHVISION_RN50_PARAMS = 25_557_032  # same page, "num_params 25557032"
BRIEF_RN50_VALUE_BYTES = 401_408      # the "bytes of values per record" for 512x28x28

# --------------------------------------------------------------------------------------------
# Published figures (cited by name in the draft). None = not found: a placeholder in the draft.
# --------------------------------------------------------------------------------------------
PUBLISHED = {
    # NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md,
    # "Training performance: NVIDIA DGX A100 (8x A100 80GB)", GPUs 1, mixed precision
    "a100_rn50_train_img_s": 2470,
    # NVIDIA DeepLearningExamples, PaddlePaddle/Classification/RN50v1.5/README.md,
    # "Inference performance: NVIDIA DGX A100 (1x A100 80GB)", Mixed Precision, batch 256
    "a100_rn50_infer_img_s": 5742.03,
    # NVIDIA DeepLearningExamples, TensorFlow2/LanguageModeling/BERT/README.md, "Fine-tuning
    # training performance for SQuAD v1.1 on NVIDIA DGX A100 (8x A100 80GB)", GPUs 1, batch 76,
    # mixed precision; BERT-Large at sequence length 384 (the README's default for its results)
    "a100_bertlarge_squad384_train_seq_s": 134.22,
    # same README, "Fine-tuning inference performance for SQuAD v1.1 on NVIDIA DGX A100
    # (1x A100 80GB)", BERT-Base FP16, sequence length 128, batch 8 (largest batch listed)
    "a100_bertbase_seq128_infer_seq_s": 1786.25,
    # A100 datasheet via unanswered.io: "FP16 and BF16 Tensor performance delivers up to 312 TFLOPS
    # (624 TFLOPS with sparsity)"
    "a100_fp16_dense_tflops": 312,
    # H200 SXM via morphllm.com/nvidia-h200 ("Per NVIDIA's H200 spec page ... 1,979 TFLOPS each of
    # FP16 and BFLOAT16 with sparsity"; H100 SXM identical compute)
    "h200_fp16_sparse_tflops": 1979,
    # No published single-GPU ResNet-50 or BERT-base training / inference rate for H100 or H200
    # was found: placeholders
    "h200_rn50_train_img_s": None,
    "h200_bertbase_train_seq_s": None,
    # Micron 9400 (PCIe Gen4) via computerbase.de: "7.000 MB/s beim Lesen wie beim Schreiben";
    # "4K Random Read IOPS ... bis zu 1,6 Millionen"
    "gen4_seq_read_mb_s": 7000,
    "gen4_seq_write_mb_s": 7000,
    "gen4_rand4k_read_iops": 1_600_000,
    # Micron 9550 MAX (PCIe Gen5) spec table reproduced from StorageReview's review, 6.4TB row:
    # Seq. Read 14,000 MB/s, Seq. Write 10,000 MB/s, Rand. Read 3,300 K IOPS
    "gen5_seq_read_mb_s": 14000,
    "gen5_seq_write_mb_s": 10000,
    "gen5_rand4k_read_iops": 3_300_000,
    # random 128 KB read rate: not in any vendor datasheet found (they give 4 KB IOPS)
    "rand128k_read_mb_s": None,
}
# same TF2 BERT README, "Fine-tuning training performance for SQuAD v1.1 on NVIDIA DGX-1 V100 (8x V100 32GB)",
# GPUs 1, mixed precision: 47.06 (only used to check the A100 row's labelling)
V100_BERTL_TRAIN = 47.06
GPUS_PER_MACHINE = 8      # ASSUMED GPUs sharing one machine's drives

# This machine (a virtio disk, 2 cores of an `Intel(R) Xeon(R) Processor`), measured by
# `recycle-bench --large 8`: the run docs/scale.md records (docs/bench-large.json), unless
# --measured names another large.json.
DEFAULT_MEASURED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs",
                                "bench-large.json")


def measured(path):
    """This machine's figures from a large.json of recycle-bench --large (medians of its rounds)."""
    import json
    with open(path) as fh:
        j = json.load(fh)
    rounds = j["rounds"]
    return {"disk_read_mb_per_s": [r["disk_read_mb_per_s"] for r in rounds],
            "cold_mb_per_s": [r["cold_mb_per_s"] for r in rounds],
            "warm_mb_per_s": [r["warm_mb_per_s"] for r in rounds],
            "disk_write_mb_per_s": j["build"]["disk_write_mb_per_s"],
            "threads": j["options"]["threads"]}


# recycle-reshard on this machine: bench/reshard_rate.py's run (docs/reshard-rate.json).
RESHARD_MEASURED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs",
                                "reshard-rate.json")


def reshard_measured(path=RESHARD_MEASURED):
    """Bytes written a second a core by a reshard here: every record of the new shards (the
    moved and the kept) over the slowest rank's move_seconds, per core of this machine."""
    import json
    with open(path) as fh:
        j = json.load(fh)
    runs = j["reshard"]
    written = j["record_bytes"]  # every record of the split is written again, kept or moved
    rate = median([written / r["seconds"] for r in runs])
    return {"written_mb_per_s": rate / 1e6, "per_core_mb_per_s": rate / 1e6 / j["cores"],
            "cores": j["cores"], "moved_mb_per_s": j["median_reshard_mb_s"],
            "loopback_mb_per_s": j["median_loopback_mb_s"], "records": j["samples"],
            "record_kb": j["record_bytes"] / j["samples"] / 1e3}


def stay_fraction(w_from, w_to):
    """The share of records whose shard index is the same under both counts (they stay on their
    rank): residues x mod lcm(w_from, w_to) with x % w_from == x % w_to."""
    lcm = w_from * w_to // math.gcd(w_from, w_to)
    return sum(1 for x in range(lcm) if x % w_from == x % w_to) / lcm


def median(v):
    v = sorted(v)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2


# --------------------------------------------------------------------------------------------
# ResNet-50 (torchvision's v1.5 layout), written out: Bottleneck blocks [3, 4, 6, 3]
# --------------------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)  # v1.5
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + idt)


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.inplanes = 64
        self.layer1 = self._make(64, 3, 1)
        self.layer2 = self._make(128, 4, 2)
        self.layer3 = self._make(256, 6, 2)
        self.layer4 = self._make(512, 3, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * Bottleneck.expansion, classes)

    def _make(self, planes, blocks, stride):
        layers = [Bottleneck(self.inplanes, planes, stride)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = self.layer4(self.layer3(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50_macs():
    """Conv and linear MACs at batch 1, 3x224x224, per top-level part, counted with forward hooks."""
    model = ResNet50().eval()
    macs, shapes = {}, {}

    def hook_for(top):
        def hook(mod, inp, out):
            if isinstance(mod, nn.Conv2d):
                k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
                macs[top] = macs.get(top, 0) + out.numel() * k
            elif isinstance(mod, nn.Linear):
                macs[top] = macs.get(top, 0) + out.numel() * mod.in_features
        return hook

    for name, mod in model.named_modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            mod.register_forward_hook(hook_for(name.split(".")[0]))
    model.layer2.register_forward_hook(lambda m, i, o: shapes.__setitem__("layer2", tuple(o.shape)))
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    params = sum(p.numel() for p in model.parameters())
    return macs, shapes["layer2"], params


# --------------------------------------------------------------------------------------------
# BERT by formula: per layer and token 4h^2 (Q, K, V, output) + 2*h*ff (FFN) + 2*L*h (QK^T, AV)
# --------------------------------------------------------------------------------------------
def bert_layer_macs(L, h=BERT_H, ff=BERT_FF):
    return L * (4 * h * h + 2 * h * ff + 2 * L * h)


def bert_base(L, k=BERT_K):
    emb = 0                                    # lookups, adds, layer norm: no matmuls
    prefix = emb + k * bert_layer_macs(L)
    head = (BERT_LAYERS - k) * bert_layer_macs(L) + BERT_H * BERT_H + BERT_H * BERT_CLASSES
    return prefix, head                        # pooler: one token's h x h; classifier h x C


def bert_large_squad(L=384):
    h, ff, layers = 1024, 4096, 24
    return layers * bert_layer_macs(L, h, ff) + L * h * 2   # span head: h x 2 per token


# --------------------------------------------------------------------------------------------
def f(x, nd=0):
    return f"{x:,.{nd}f}"


def main():
    P = PUBLISHED
    out = []
    w = out.append

    # ---- FLOPs ------------------------------------------------------------------------------
    m, l2_shape, params = resnet50_macs()
    rn_pre = sum(m[p] for p in ("conv1", "layer1", "layer2"))
    rn_head = sum(m[p] for p in ("layer3", "layer4", "fc"))
    rn_full = rn_pre + rn_head
    rn_check = rn_full / 1e9 / TORCHVISION_RN50_GFLOPS
    l2_values = math.prod(l2_shape[1:])
    rn_rec_fp16 = l2_values * FP16 + HEADER
    rn_rec_int8 = l2_values * 1 + l2_shape[1] * 8 + HEADER   # (scale, offset) f32 per channel

    bb_pre, bb_head = bert_base(BERT_L)
    bb_full = bb_pre + bb_head
    bb_pre_med, bb_head_med = bert_base(L_MED)
    bl_full = bert_large_squad()
    bb_rec = BERT_L * BERT_H * FP16 + HEADER
    bb_rec_med = L_MED * BERT_H * FP16 + HEADER

    # ---- published rates -> rates of the parts ------------------------------------------------
    # full fine-tuning step = 3 x forward (backward = 2 x forward) for the whole net;
    # head training = 3 x the head's forward; so the step's fraction = head / full
    rn_frac = rn_head / rn_full
    rn_head_rate = P["a100_rn50_train_img_s"] / rn_frac
    rn_pre_rate = P["a100_rn50_infer_img_s"] * rn_full / rn_pre
    rn_pre_rate_x3 = 3 * P["a100_rn50_train_img_s"] * rn_full / rn_pre   # cross-check
    rn_mfu = P["a100_rn50_train_img_s"] * 3 * rn_full * 2 / (P["a100_fp16_dense_tflops"] * 1e12)

    bb_train_scaled = P["a100_bertlarge_squad384_train_seq_s"] * bl_full / bb_full
    bb_train_from_infer = P["a100_bertbase_seq128_infer_seq_s"] / 3
    bb_frac = bb_head / bb_full
    bb_head_rate = bb_train_scaled / bb_frac
    bb_head_rate_low = bb_train_from_infer / bb_frac
    bb_frac_med = bb_head_med / bb_full                 # head at L_med vs the full step at 128
    bb_head_rate_med = bb_train_scaled / bb_frac_med
    bb_pre_rate = P["a100_bertbase_seq128_infer_seq_s"] * bb_full / bb_pre
    bb_pre_rate_med = P["a100_bertbase_seq128_infer_seq_s"] * bb_full / bb_pre_med
    bl_mfu = P["a100_bertlarge_squad384_train_seq_s"] * 3 * bl_full * 2 / (P["a100_fp16_dense_tflops"] * 1e12)

    h200_ratio = P["h200_fp16_sparse_tflops"] / 2 / P["a100_fp16_dense_tflops"]

    # ---- variants ------------------------------------------------------------------------------
    # name, samples, record bytes, head samples/s/GPU, prefix samples/s/GPU (build)
    V = [
        ("ImageNet, ResNet-50 to layer2, fp16", IMAGENET_TRAIN, rn_rec_fp16, rn_head_rate, rn_pre_rate),
        ("ImageNet, ResNet-50 to layer2, int8", IMAGENET_TRAIN, rn_rec_int8, rn_head_rate, rn_pre_rate),
        (f"1M texts, BERT-base to layer {BERT_K}, {BERT_L} tokens fp16", TEXTS, bb_rec, bb_head_rate, bb_pre_rate),
        (f"1M texts, records of L_med = {L_MED} tokens, head padded to {BERT_L}", TEXTS, bb_rec_med,
         bb_head_rate, bb_pre_rate),
        (f"1M texts, records of L_med = {L_MED} tokens, head at {L_MED}", TEXTS, bb_rec_med,
         bb_head_rate_med, bb_pre_rate_med),
    ]
    disks = [
        ("PCIe Gen4 NVMe, sequential (Micron 9400)", P["gen4_seq_read_mb_s"] / 1e3),
        ("PCIe Gen5 NVMe, sequential (Micron 9550)", P["gen5_seq_read_mb_s"] / 1e3),
        ("this machine: the engine's cold epoch (virtio)", median(MEASURED["cold_mb_per_s"]) / 1e3),
    ]

    # ---- draft -------------------------------------------------------------------------------
    w("# Capacity plan: ImageNet through ResNet-50 and a 1M-text task through BERT-base, on 8, 64 and 512 ranks")
    w("")
    w("Every number below is printed by `/usr/bin/python3 scripts/scale_plan.py > docs/scale-plan.md` (torch on the CPU, "
      "no torchvision) except the published figures, which are cited by document and figure in *Sources*. "
      "GB = 1e9 bytes; GMAC = 1e9 multiply-accumulates (2 FLOPs each). All GPU rates are for one A100 80GB, "
      "the newest GPU for which published single-GPU figures for these models could be found; the H200 has "
      "placeholders.")
    w("")
    w("## Compute per sample (forward, batch 1)")
    w("")
    w("ResNet-50 is written out in torch (Bottleneck blocks [3, 4, 6, 3], widths 64/128/256/512 x4, stride "
      "on the 3x3 as in torchvision's v1.5) and its conv and linear MACs are counted with forward hooks on a "
      "3x224x224 input. BERT-base is counted by formula: per layer and token 4h^2 + 2*h*4h for the "
      "projections and the FFN, plus 2*L*h for attention (h = 768); embeddings count no MACs; the head adds "
      f"the pooler (h x h, one token) and a classifier of {BERT_CLASSES} classes (assumed).")
    w("")
    w("| network | prefix (GMAC) | head (GMAC) | full (GMAC) | head / full |")
    w("| --- | --- | --- | --- | --- |")
    w(f"| ResNet-50, prefix stem..layer2, head layer3, layer4, pool, fc | {f(rn_pre/1e9, 3)} | {f(rn_head/1e9, 3)} "
      f"| {f(rn_full/1e9, 3)} | {f(rn_frac, 3)} |")
    w(f"| BERT-base at {BERT_L} tokens, prefix embeddings + {BERT_K} layers, head layers {BERT_K+1}..{BERT_LAYERS} + pooler + classifier "
      f"| {f(bb_pre/1e9, 3)} | {f(bb_head/1e9, 3)} | {f(bb_full/1e9, 3)} | {f(bb_frac, 3)} |")
    w(f"| BERT-base at {L_MED} tokens (same cut) | {f(bb_pre_med/1e9, 3)} | {f(bb_head_med/1e9, 3)} "
      f"| {f((bb_pre_med + bb_head_med)/1e9, 3)} | {f(bb_head_med/(bb_pre_med + bb_head_med), 3)} |")
    w(f"| BERT-large at 384 tokens (SQuAD head), for scaling the published rate | | | {f(bl_full/1e9, 3)} | |")
    w("")
    w("ResNet-50 per part (GMAC): " + ", ".join(f"{k} {f(v/1e9, 3)}" for k, v in m.items()) + ".")
    w(f"Check: the written-out ResNet-50 has {f(params)} parameters (torchvision: {f(TORCHVISION_RN50_PARAMS)}) "
      f"and {f(rn_full/1e9, 3)} GMACs against torchvision's published {TORCHVISION_RN50_GFLOPS} "
      f"(ratio {f(rn_check, 4)}). layer2's output is {l2_shape[1]}x{l2_shape[2]}x{l2_shape[3]} = "
      f"{f(l2_values)} values.")
    w("")
    w("**The issue's ResNet record size is off by 2x.** 512x28x28 is "
      f"{f(l2_values)} *values*; in fp16 that is {f(l2_values*FP16)} bytes, so the record used here is "
      f"{f(l2_values*FP16)} + {HEADER} = {f(rn_rec_fp16)} bytes. The issue's {f(BRIEF_RN50_VALUE_BYTES)} bytes is "
      f"what the int8 codec stores ({f(l2_values)} value bytes + {l2_shape[1]} x 8 bytes of scales and offsets "
      f"+ {HEADER} = {f(rn_rec_int8)} bytes a record), given as a second row. The text records are as the issue "
      f"gives them ({f(BERT_L*BERT_H*FP16)} and {f(L_MED*BERT_H*FP16)} bytes of values) plus the same {HEADER}-byte header.")
    w("")

    w("## Per GPU (A100 80GB; independent of the number of ranks)")
    w("")
    w("Head training's share of a full fine-tuning step is head fwd+bwd over full fwd+bwd with backward = 2x "
      "forward, i.e. head / full above. A GPU training the head only is taken to reach the published "
      "full fine-tuning rate divided by that share (assumption: throughput scales with FLOPs; an upper bound, "
      "since a small head uses the GPU less well and the step now includes reading and decoding records). "
      "The build rate is a published inference rate divided by the prefix's share of the forward.")
    w("")
    w(f"- ResNet-50: full fine-tuning {f(P['a100_rn50_train_img_s'])} img/s (published) -> head share "
      f"{f(rn_frac, 3)} -> **{f(rn_head_rate)} img/s** training the head. Prefix alone: "
      f"{f(P['a100_rn50_infer_img_s'], 2)} img/s full-network inference (published) -> **{f(rn_pre_rate)} img/s**; "
      f"cross-check from 3x the training rate: {f(rn_pre_rate_x3)} img/s. The published training rate uses "
      f"{f(100*rn_mfu, 1)}% of the A100's dense FP16 peak.")
    w(f"- BERT-base at {BERT_L} tokens: **no published BERT-base fine-tuning (training) rate was found.** Scaling "
      f"the published BERT-large SQuAD-384 fine-tuning rate ({f(P['a100_bertlarge_squad384_train_seq_s'], 2)} seq/s, "
      f"{f(100*bl_mfu, 1)}% of dense FP16 peak) by FLOPs gives {f(bb_train_scaled)} seq/s for full BERT-base "
      f"fine-tuning (derived, used below); a third of the published BERT-base inference rate "
      f"({f(P['a100_bertbase_seq128_infer_seq_s'], 2)} seq/s at batch 8) gives {f(bb_train_from_infer)} seq/s "
      f"(low cross-check). Head share {f(bb_frac, 3)} -> **{f(bb_head_rate)} texts/s** training the head "
      f"({f(bb_head_rate_low)} from the low cross-check). Prefix alone: **{f(bb_pre_rate)} texts/s** from the "
      f"batch-8 inference figure (likely below what a larger batch reaches).")
    w(f"- BERT-base with records of L_med = {L_MED} tokens and the head run at that length: head share "
      f"{f(bb_frac_med, 3)} of the {BERT_L}-token step -> {f(bb_head_rate_med)} texts/s; prefix at {L_MED} tokens "
      f"{f(bb_pre_rate_med)} texts/s (same scaling).")
    w("")
    w("**Reading (head training).** Headroom = the disk's rate / the rate needed; below 1x the GPU waits "
      f"on the disk. A machine of {GPUS_PER_MACHINE} GPUs (assumed) needs {GPUS_PER_MACHINE}x a GPU's rate from its own drives.")
    w("")
    w("| workload | record bytes | head samples/s / GPU | read GB/s / GPU | read GB/s / machine | "
      + " | ".join(f"headroom / GPU: {d[0]} ({f(d[1], 1)} GB/s)" for d in disks) + " | "
      + " | ".join(f"drives / machine: {d[0]}" for d in disks[:2]) + " |")
    w("| --- " * (5 + len(disks) + 2) + "|")
    for name, n, rec, hr, pr in V:
        need = hr * rec / 1e9
        cells = [name, f(rec), f(hr), f(need, 2), f(need * GPUS_PER_MACHINE, 2)]
        cells += [f"{f(d[1] / need, 2)}x" for d in disks]
        cells += [str(math.ceil(need * GPUS_PER_MACHINE / d[1])) for d in disks[:2]]
        w("| " + " | ".join(cells) + " |")
    w("")
    w("**Writing (build).** The prefix's rate times the record size is what the build must write per GPU "
      "if the prefix is the bound; against the datasheets' sequential write rates:")
    w("")
    wdisks = [("PCIe Gen4 NVMe (Micron 9400)", P["gen4_seq_write_mb_s"] / 1e3),
              ("PCIe Gen5 NVMe (Micron 9550)", P["gen5_seq_write_mb_s"] / 1e3)]
    w("| workload | build samples/s / GPU (prefix only) | write GB/s / GPU | "
      + " | ".join(f"headroom / GPU: {d[0]} ({f(d[1], 1)} GB/s)" for d in wdisks) + " |")
    w("| --- " * (3 + len(wdisks)) + "|")
    for name, n, rec, hr, pr in V:
        wr = pr * rec / 1e9
        w("| " + " | ".join([name, f(pr), f(wr, 2)] + [f"{f(d[1] / wr, 2)}x" for d in wdisks]) + " |")
    w("")
    M = MEASURED
    disk, cold, warm = (median(M[k]) / 1e3 for k in ("disk_read_mb_per_s", "cold_mb_per_s", "warm_mb_per_s"))
    per_core = warm / M["threads"]
    w(f"This machine (`recycle-bench --large 8`, docs/scale.md): its disk read the cache's files in order at "
      f"{f(disk, 2)} GB/s (median; {f(min(M['disk_read_mb_per_s']) / 1e3, 2)}-{f(max(M['disk_read_mb_per_s']) / 1e3, 2)}), "
      f"wrote in order at {f(M['disk_write_mb_per_s'] / 1e3, 2)} GB/s; the engine's cold epoch read {f(cold, 2)} GB/s "
      f"and its warm one {f(warm, 2)} GB/s on {M['threads']} cores, that is {f(per_core, 2)} GB/s a core for reading, "
      f"checking and decoding fp16 records on the host: with nothing to read (warm) an epoch still took "
      f"{f(cold / warm, 2)} of the cold one's time (1/{f(warm / cold, 2)}), so the host's work sets most of it and "
      "the disk adds the rest. At that rate per core a GPU "
      "that decodes on the host needs (scaled by bytes; int8 decodes by another loop) " + "; ".join(
          f"{nm}: {f(hr * rec / 1e9 / per_core, 1)} cores" for nm, _, rec, hr, _ in V) +
      ". A CUDA device decodes on the GPU (`CachedBatches::set_device_decode`, on by itself there), which leaves "
      "the host the read and the checksums; that rate is not measured yet. Random 128 KB reads of a datasheet: "
      "none found (they give 4 KB random IOPS, which at 4 KiB a read move "
      f"{f(P['gen4_rand4k_read_iops']*4096/1e9, 2)} GB/s on Gen4 and {f(P['gen5_rand4k_read_iops']*4096/1e9, 2)} GB/s "
      "on Gen5, an upper bound on small random reads only).")
    w("")

    for title, names in (("ImageNet (1,281,167 images) through ResNet-50 cut after layer2", V[:2]),
                         ("1M texts through BERT-base cut after layer 6 of 12", V[2:])):
        w(f"## {title}: per rank")
        w("")
        w("| records | ranks | samples / rank | cache GB / rank | build s / rank (prefix only) | build h / rank | head epoch s / rank | "
          "read GB/s / GPU | one Gen4 drive a GPU keeps up (sequential) | one Gen5 drive a GPU keeps up (sequential) | this disk keeps up |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, n, rec, hr, pr in names:
            need = hr * rec / 1e9
            for r in RANKS:
                per = math.ceil(n / r)
                cells = [name, str(r), f(per), f(per * rec / 1e9, 2), f(per / pr, 1), f(per / pr / 3600, 4),
                         f(per / hr, 1), f(need, 2)]
                cells += ["yes" if d[1] >= need else f"no ({f(need / d[1], 1)} drives)" for d in disks]
                w("| " + " | ".join(cells) + " |")
        w("")
        w("Whole cache: " + "; ".join(f"{nm}: {f(nn_ * rc / 1e9, 1)} GB" for nm, nn_, rc, _, _ in names) + ".")
        w("")

    R = reshard_measured()
    w("## Changing the number of ranks: recycle-reshard")
    w("")
    w("A reshard from W to W' ranks sends a record to another rank unless its key's hash gives the same index "
      "modulo both (docs/scale.md); every rank of the new count writes its whole new shard (the records it keeps "
      "too). Measured here (docs/reshard-rate.json, `bench/reshard_rate.py`: "
      f"{f(R['records'])} records of {f(R['record_kb'], 1)} KB, shards of 2 to 3 on {R['cores']} cores): {f(R['written_mb_per_s'])} MB/s of records written by the machine, that is "
      f"{f(R['per_core_mb_per_s'])} MB/s a core, with the records crossing between ranks at {f(R['moved_mb_per_s'])} "
      f"MB/s against the loopback's {f(R['loopback_mb_per_s'])}: the writes bound it, not the network. The time "
      "below assumes one core a rank at that rate and a network faster than it (25 Gb/s Ethernet carries "
      f"{f(25e9 / 8 / 1e6)} MB/s), so it is this machine's write path, not a cluster's:")
    w("")
    w("| records | W -> W' | records moved | GB received / new rank | GB written / new rank | minutes / new rank at the measured rate |")
    w("| --- | --- | --- | --- | --- | --- |")
    for name, n, rec, hr, pr in V:
        for a, b in ((64, 32), (64, 128), (8, 64), (512, 64)):
            moved = 1 - stay_fraction(a, b)
            per_new = n * rec / b
            w(f"| {name} | {a} -> {b} | {f(100 * moved)}% | {f(moved * per_new / 1e9, 2)} | "
              f"{f(per_new / 1e9, 2)} | {f(per_new / 1e6 / R['per_core_mb_per_s'] / 60, 1)} |")
    w("")

    w("## H200 (the device machine's GPU): placeholders")
    w("")
    w("No published single-GPU ResNet-50 or BERT-base training or inference rate for the H100 or H200 was "
      "found, so the H200 rows are placeholders to fill from a measurement (the project's "
      "`bench/gpu_bench.py` through `scripts/device_check.sh` reports the head's epoch from the cache and full "
      "fine-tuning on the device). Not a figure, only a bound on how far the read rates could move: the "
      f"datasheet dense FP16 peak ratio H200 / A100 is {f(h200_ratio, 2)}x; if head training scaled by it, the "
      "read rates per GPU would be:")
    w("")
    w("| workload | head samples/s (H200) | read GB/s needed (H200) | if scaled by the peak ratio (not a figure) |")
    w("| --- | --- | --- | --- |")
    for name, n, rec, hr, pr in V:
        w(f"| {name} | ____ | ____ | {f(hr * h200_ratio)} samples/s, {f(hr * h200_ratio * rec / 1e9, 2)} GB/s |")
    w("")
    w(f"The published A100 rates use {f(100*rn_mfu, 1)}% (ResNet-50) and {f(100*bl_mfu, 1)}% (BERT-large) of "
      "the dense FP16 peak, so the peak ratio is unlikely to carry over: treat that column as a ceiling.")
    w("")

    w("## Assumptions")
    w("")
    w(f"- Record = value bytes + {HEADER} bytes of header and checksum (an assumption, to be replaced by the "
      "size `recycle.inspect` reports for a real record; a record with a label tensor beside the activation "
      "will be larger). Records as stored before RocksDB's block compression; LZ4 may shrink post-ReLU fp16 "
      "records on disk, not counted.")
    w(f"- Text length: L_med = {L_MED} tokens is an assumed median, and it is used as the mean (throughput "
      "follows the mean length): replace with the corpus's measured mean. The 128-token rows pad every text.")
    w("- Throughput scales with FLOPs: head-only training rate = published full fine-tuning rate / head "
      "share; prefix rate = published inference rate / prefix share. Upper bounds: small heads and short "
      "sequences use the GPU less well, and data loading is not counted.")
    w("- BERT-base's full fine-tuning rate is derived from BERT-large's (FLOP-scaled, "
      "sequence length 384 -> 128), not published; the low cross-check is a third of a batch-8 inference rate.")
    w("- Build times count the prefix's forward only: no JPEG decoding, tokenisation, disk writes or "
      "ingest; the write rate the build then needs is in the per-GPU table.")
    w("- Per rank = the samples of a shard padded to ceil(N / ranks), as `recycle-train --sharded` pads; "
      "the read rate per GPU does not depend on the number of ranks, only the bytes and times per rank do.")
    w("- Disk figures are vendor maxima (fresh, large transfers, high queue depth); a shuffled epoch over "
      f"RocksDB reads one record ({f(min(v[2] for v in V)/1e6, 2)}-{f(max(v[2] for v in V)/1e6, 2)} MB) at a time per request.")
    w("")
    w("## Sources (published figures, as quoted)")
    w("")
    w(f"1. NVIDIA DeepLearningExamples, *ResNet50 v1.5 For PyTorch* (PyTorch/Classification/ConvNets/resnet50v1.5/README.md; "
      "also NGC \"ResNet50 v1.5 for PyTorch\"), table \"Training performance: NVIDIA DGX A100 (8x A100 80GB)\", row GPUs 1: "
      f"\"Throughput - mixed precision {P['a100_rn50_train_img_s']} img/s\" (TF32 938 img/s; pytorch-21.03 NGC container). "
      "The same README gives inference tables only for V100 and T4.")
    w(f"2. NVIDIA DeepLearningExamples, *ResNet50 v1.5 for PaddlePaddle* (PaddlePaddle/Classification/RN50v1.5/README.md), "
      "\"Inference performance: NVIDIA DGX A100 (1x A100 80GB)\", *Mixed Precision Inference Latency*, batch 256: "
      f"\"{P['a100_rn50_infer_img_s']} img/s\" (framework inference, not TensorRT; the same README's training table "
      "gives 2897 img/s mixed precision on 1 GPU, PaddlePaddle).")
    w(f"3. NVIDIA DeepLearningExamples, *BERT 1.0 for TensorFlow 2* (TensorFlow2/LanguageModeling/BERT/README.md; NGC "
      "\"BERT for TensorFlow2\", Performance), \"Fine-tuning training performance for SQuAD v1.1 on NVIDIA DGX A100 (8x A100 80GB)\", "
      f"row GPUs 1, batch 76: \"Throughput - mixed precision {P['a100_bertlarge_squad384_train_seq_s']}\" sequences/s. "
      "The page says \"All results are on BERT-Large model unless otherwise mentioned. All fine tuning results are on SQuAD v1.1 "
      "using a sequence length of 384 unless otherwise mentioned.\" Caveat: the sentence under this table's heading says the "
      "results were obtained \"on NVIDIA DGX-2 with 16x V100 32GB GPUs\" (a copy-paste slip in the README, it seems: the figure is "
      f"{f(P['a100_bertlarge_squad384_train_seq_s'] / V100_BERTL_TRAIN, 2)}x the README's 1-GPU V100 32GB row, {V100_BERTL_TRAIN}, "
      "which fits an A100 better than a V100).")
    w(f"4. Same README, \"Fine-tuning inference performance for SQuAD v1.1 on NVIDIA DGX A100 (1x A100 80GB)\", *BERT-Base FP16*, "
      f"sequence length 128, batch 8: \"{P['a100_bertbase_seq128_infer_seq_s']}\" sequences/s (the largest batch listed; "
      "the text under the heading again says DGX-2 / V100).")
    w(f"5. A100 peak: unanswered.io, *NVIDIA A100 GPU performance* (citing NVIDIA's A100 datasheet): \"FP16 and BF16 Tensor "
      f"performance delivers up to {P['a100_fp16_dense_tflops']} TFLOPS (624 TFLOPS with sparsity)\"; glennklockwood.com "
      "*A100* gives the same (FP16 312 / 624 sparse, from NVIDIA's datasheet PDF).")
    w(f"6. H200 / H100 peak: morphllm.com, *NVIDIA H200*: \"Per NVIDIA's H200 spec page, the SXM form factor delivers 3,958 "
      f"TFLOPS of FP8 Tensor Core performance with sparsity and {f(P['h200_fp16_sparse_tflops'])} TFLOPS each of FP16 and "
      "BFLOAT16 with sparsity\"; \"141GB of HBM3e running at 4.8TB/s\"; \"The H200 SXM and H100 SXM have identical Tensor Core "
      "compute\". NVIDIA's own H100/H200 datasheet was not in the searchable store: confirm against it. Dense = half the "
      "sparse figure.")
    w(f"7. PCIe Gen4: ComputerBase, *Micron 9400 SSD: Alle Modelle Lesen und Schreiben mit 7 GB/s* (2023-01): \"sequenziellen "
      f"Transferraten mit {f(P['gen4_seq_read_mb_s']).replace(',', '.')} MB/s beim Lesen wie beim Schreiben\"; \"4K Random Read IOPS, "
      "die von zuvor bis zu 850.000 auf nun bis zu 1,6 Millionen ansteigen\".")
    w(f"8. PCIe Gen5: StorageReview, *Micron 9550 MAX review* (spec table \"Micron 9550 MAX Specifications (U.2 / E3.S)\", as "
      f"reproduced on korean.storagesserver.com), row 6.4TB: Seq. Read {f(P['gen5_seq_read_mb_s'])} MB/s, Seq. Write "
      f"{f(P['gen5_seq_write_mb_s'])} MB/s, Rand. Read {f(P['gen5_rand4k_read_iops']/1e3)} K IOPS; windowsforum.com on Micron's "
      "product pages: \"up to 14 GB/s sequential reads, 10 GB/s sequential writes, and up to 3.3 million 4K random read IOPS\".")
    w("9. Micron *9200 NVMe SSDs* datasheet (micron.com, copy on vdocument.in), to show what the sequential figures mean: "
      "\"Sequential 128KB read: Up to 3.50 GB/s\", \"Random 4KB read: Up to 840K IOPS\" (PCIe Gen3). No datasheet found gives a "
      "random 128 KB read rate: placeholder.")
    w(f"10. torchvision docs, *torchvision.models.resnet50*, ResNet50_Weights.IMAGENET1K_V1: \"GFLOPS {TORCHVISION_RN50_GFLOPS}\", "
      f"\"num_params {TORCHVISION_RN50_PARAMS}\".")
    w("11. This machine (not published): `recycle-bench --large 8` as docs/scale.md records it (its large.json "
      "with --measured).")
    w("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) not in (1, 3) or (len(sys.argv) == 3 and sys.argv[1] != "--measured"):
        sys.exit("usage: scale_plan.py [--measured LARGE_JSON]")
    MEASURED = measured(sys.argv[2] if len(sys.argv) == 3 else DEFAULT_MEASURED)
    sys.stdout.write(main())
