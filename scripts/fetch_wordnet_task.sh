#!/usr/bin/env bash
# Writes the second text task of docs/minilm.md: WordNet 3.0's noun glosses (Debian's
# wordnet-base, installed when missing) classified by their supersense, five classes: animal,
# artifact, food, person, plant (the lexicographer files noun.animal, ...). Each synset's gloss
# is one sample (its definition, without the quoted examples); a seeded, balanced draw of
# TRAIN and TEST glosses a class, the test ones distinct from the training ones:
#   OUT/train.tsv, OUT/test.tsv   label<TAB>text, as examples/finetune_minilm.py --data takes them
# Usage: scripts/fetch_wordnet_task.sh [OUT] [TRAIN] [TEST]   (default data/wordnet-supersenses 600 400)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/wordnet-supersenses}
train=${2:-600}
test=${3:-400}
data=/usr/share/wordnet/data.noun
if [ ! -f "$data" ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends wordnet-base
fi
mkdir -p "$out"
python3 - "$data" "$out" "$train" "$test" <<'PY'
import random
import sys

data, out, train, test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# lexnames(5WN): the lexicographer file numbers of the five classes.
classes = {5: "animal", 6: "artifact", 13: "food", 18: "person", 20: "plant"}
glosses = {name: [] for name in classes.values()}
with open(data, encoding="utf-8") as f:
    for line in f:
        if line.startswith("  "):  # the licence at the top
            continue
        fields, _, gloss = line.partition(" | ")
        lexfile = int(fields.split()[1])
        definition = gloss.split('; "')[0].strip().rstrip(";").strip()
        if lexfile in classes and definition:
            glosses[classes[lexfile]].append(definition)
rng = random.Random(0)
rows = {"train": [], "test": []}
for name, texts in sorted(glosses.items()):
    texts = sorted(set(texts))  # a gloss shared by two synsets of a class is one sample
    if len(texts) < train + test:
        sys.exit(f"fetch_wordnet_task: {len(texts)} {name} glosses, fewer than {train} + {test}")
    rng.shuffle(texts)
    rows["train"] += [(name, t) for t in texts[:train]]
    rows["test"] += [(name, t) for t in texts[train:train + test]]
for split, items in rows.items():
    rng.shuffle(items)
    with open(f"{out}/{split}.tsv", "w", encoding="utf-8") as f:
        for name, text in items:
            f.write(f"{name}\t{text.replace(chr(9), ' ')}\n")
    print(f"fetch_wordnet_task: {out}/{split}.tsv: {len(items)} glosses, "
          f"{len(items) // len(classes)} a class ({', '.join(sorted(classes.values()))})")
PY
