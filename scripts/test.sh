#!/usr/bin/env bash
# Run dokimi's whole test suite on this machine, installing what the tests need first:
# the docker daemon and the offline base image (scripts/setup.sh), every built-in harness CLI at its pin and the
# pinned Node runtime (scripts/install-harness.sh), Chromium for the HTML report test, and dokimi itself with its test extras.
# Then: dokimi's own docs must pass its L0 scan, and pytest runs everything.
#
#   bash scripts/test.sh [PYTEST ARGS...]
#   bash scripts/test.sh --fast [PYTEST ARGS...]   # the edit loop: no docker, no harness CLI, nothing slow, no
#                                                  # installs (CI runs the whole suite)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'test: %s\n' "$*" >&2; }

if [[ "${1:-}" == "--fast" ]]; then
    shift
    log "fast: the tests that need no docker, no harness CLI and no Ray, and are not marked slow"
    exec python3 -m pytest -q -p no:cacheprovider -m "not docker and not harness and not slow and not ray" "$@"
fi

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 \
        || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2; }
}

bash scripts/setup.sh
if ! command -v npm >/dev/null 2>&1; then
    # scripts/install-harness.sh needs npm (only to install Claude Code; its native binary runs without Node)
    log "installing npm (Claude Code is installed with it)"
    apt_install npm
fi
# every built-in harness at its pin (its profile's verification block), then the pinned Node; each path goes
# to DOKIMI_<NAME>_BIN, where dokimi and tests/conftest.py look first
for profile in src/dokimi/harness/profiles/*.yaml; do
    name="$(basename "$profile" .yaml)"
    variable="DOKIMI_$(printf '%s' "$name" | tr 'a-z-' 'A-Z_')_BIN"
    path="$(bash scripts/install-harness.sh "$name")"
    export "$variable=$path"
done
DOKIMI_CLAUDE_BIN="$DOKIMI_CLAUDE_CODE_BIN"
DOKIMI_NODE_BIN="$(bash scripts/install-harness.sh node)"
export DOKIMI_CLAUDE_BIN DOKIMI_NODE_BIN
if ! command -v chromium >/dev/null 2>&1; then
    log "installing chromium (headless HTML report test)"
    apt_install chromium
fi

log "installing dokimi with its test extras and Ray (tests/runner/test_ray_executor.py starts a local Ray cluster)"
if python3 -m pip show -q dokimi >/dev/null 2>&1 && python3 -m pip show -f dokimi 2>/dev/null | grep -q __editable__; then
    # an earlier checkout was installed under the old distribution name; it is dokimi-eval now
    python3 -m pip uninstall -y -q dokimi >&2
fi
# an installed awscli pins botocore; inspect-ai (test extra) would upgrade it through aiobotocore unless held
constraints="$(mktemp)"
python3 -c 'import importlib.metadata as m
try:
    print("\n".join(r for r in (m.requires("awscli") or []) if r.startswith("botocore")))
except m.PackageNotFoundError:
    pass' > "$constraints"
python3 -m pip install --quiet --disable-pip-version-check -c "$constraints" -e '.[test,ray]' >&2
rm -f "$constraints"

log "L0 scan of dokimi's own docs (they must not lie either)"
python3 cli.py repo scan . --manifest-file .dokimi-selfscan.yaml --fail-on-fail

log "pytest"
exec python3 -m pytest -q -p no:cacheprovider --durations=25 "$@"
