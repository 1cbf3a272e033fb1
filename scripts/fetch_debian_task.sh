#!/usr/bin/env bash
# Writes a text task from Debian's own package index: each package's description (its synopsis,
# and the first sentence of its long description where the index carries one: Debian's
# Packages files mostly carry the synopsis alone, median 42 characters) classified by its
# section, five classes: games, graphics, net, science, sound. Every Debian machine has the
# index after `apt-get update` (run here when the index is empty). A description shared by
# several packages (a -data or -doc package that repeats its program's) is one sample, kept
# only when all its packages agree on the section; a seeded, balanced draw of TRAIN and TEST
# descriptions a class, the test ones distinct from the training ones:
#   OUT/train.tsv, OUT/test.tsv   label<TAB>text, as examples/finetune_minilm.py --data takes them
# Usage: scripts/fetch_debian_task.sh [OUT] [TRAIN] [TEST]   (default data/debian-sections 400 200)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/debian-sections}
train=${2:-400}
test=${3:-200}
if [ "$(apt-cache dumpavail | grep -c '^Package:')" -lt 1000 ]; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -q
fi
mkdir -p "$out"
index=$(mktemp)
trap 'rm -f "$index"' EXIT
apt-cache dumpavail >"$index"
python3 - "$index" "$out" "$train" "$test" <<'PY'
import random
import re
import sys

index, out, train, test = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
classes = ("games", "graphics", "net", "science", "sound")


def stanzas(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        fields, key = {}, None
        for line in f:
            if not line.strip():
                if fields:
                    yield fields
                fields, key = {}, None
            elif line[0] in " \t" and key:
                fields[key] += "\n" + line.strip()
            else:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def text_of(description):
    """The synopsis and the long description's first sentence, on one line."""
    synopsis, _, rest = description.partition("\n")
    body = " ".join(l for l in rest.split("\n") if l != ".")
    first = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0] if body else ""
    text = f"{synopsis}. {first}" if first else synopsis
    return " ".join(text.replace("\t", " ").split())


sections = {}  # text -> the sections of the packages that carry it
for s in stanzas(index):
    description = s.get("Description") or s.get("Description-en")
    if description and "Section" in s:
        sections.setdefault(text_of(description), set()).add(s["Section"].split("/")[-1])
texts = {name: sorted(t for t, secs in sections.items() if secs == {name}) for name in classes}
rng = random.Random(0)
rows = {"train": [], "test": []}
for name in classes:
    have = texts[name]
    if len(have) < train + test:
        sys.exit(f"fetch_debian_task: {len(have)} {name} descriptions, fewer than {train} + {test}")
    rng.shuffle(have)
    rows["train"] += [(name, t) for t in have[:train]]
    rows["test"] += [(name, t) for t in have[train:train + test]]
for split, items in rows.items():
    rng.shuffle(items)
    with open(f"{out}/{split}.tsv", "w", encoding="utf-8") as f:
        for name, text in items:
            f.write(f"{name}\t{text}\n")
    print(f"fetch_debian_task: {out}/{split}.tsv: {len(items)} descriptions, "
          f"{len(items) // len(classes)} a class ({', '.join(classes)})")
PY
