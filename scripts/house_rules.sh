#!/usr/bin/env bash
# The engine's house rules that a command can check (DESIGN.md's layout; issue 68), run by ctest
# as house_rules:
#   - engine/options/, the home of every options struct's validate(), includes nothing from
#     engine/jobs/ (the jobs use the options, not the other way round);
#   - cache/ and keyers/ know nothing of engine/ (no include of an engine/ header);
#   - no function over 80 lines and no file over 700 in engine/, cache/ and keyers/
#     (scripts/long_functions.sh).
# Prints each breach as FILE:LINE: what, and exits 1 when there is any.
# Usage: scripts/house_rules.sh
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
# $1: folders; $2: the include prefix they must not use; $3: why.
no_includes() {
  local hits
  hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"$2" $1 --include='*.h' \
         --include='*.cc' || true)
  if [ -n "$hits" ]; then
    printf '%s\n' "$hits" | sed "s|\$|   ($3)|"
    status=1
  fi
}
no_includes "engine/options" "engine/jobs/" "engine/options/ includes nothing from engine/jobs/"
no_includes "cache keyers" "engine/" "cache/ and keyers/ know nothing of engine/"
bash scripts/long_functions.sh || status=1
exit "$status"
