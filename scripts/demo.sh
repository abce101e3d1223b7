#!/usr/bin/env bash
# Set up this machine and run dokimi's main job on the bundled example (examples/calc), end to end:
# validate, L0 scan, task self-check in containers, a batch with two guidance arms driven by the real
# Claude Code CLI against the scripted model server (zero cost: --dry-run), then the report and the comparison.
#
#   bash scripts/demo.sh [OUT_DIR]        (default OUT_DIR: ./repo-runs)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$PWD/repo-runs}"

log() { printf '\n== %s\n' "$*" >&2; }

bash scripts/setup.sh
claude="$(bash scripts/install-harness.sh)"
python3 -m pip install --quiet --disable-pip-version-check -e . >&2

example="$out/example-calc"
if [[ ! -d "$example/.git" ]]; then
    log "building the example repository into $example"
    mkdir -p "$out"
    python3 examples/build_example.py "$example" >&2
fi
source="$example@HEAD"
manifest=".agent-eval/repo-eval.yaml"

log "dokimi repo validate"
dokimi repo validate "$source" --manifest "$manifest"
log "dokimi repo scan"
dokimi repo scan "$source" --manifest "$manifest" --fail-on-fail
log "dokimi repo tasks check"
dokimi repo tasks check "$source" --manifest "$manifest" --out "$out" -j 2
log "dokimi repo run (two guidance arms, real Claude Code, scripted model: no cost)"
dokimi repo run "$source" --manifest "$manifest" --arm guidance:none,guidance:raw \
    --model claude-haiku-4-5 --reps 2 --batch demo --out "$out" --bin "$claude" --dry-run -j 2
log "dokimi repo report"
dokimi repo report "$out/demo" --html "$out/demo-site"
log "dokimi repo compare"
dokimi repo compare "$out/demo" --baseline guidance:none --html "$out/demo-site/compare.html"
log "done: $out/demo-site/index.html (every cell linked) and $out/demo-site/compare.html"
