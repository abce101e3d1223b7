#!/usr/bin/env bash
# Install the pinned Claude Code CLI (the harness the e2e tests drive) with npm into a private prefix,
# then print the absolute path of its binary on stdout (and nothing else on stdout).
#
#   scripts/install-harness.sh            # installs into ${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}/claude-code-<ver>
#   scripts/install-harness.sh PREFIX     # installs into PREFIX
#   DOKIMI_CLAUDE_BIN=$(scripts/install-harness.sh)
#
# The registry is whatever npm is configured to use; this script never names one.
# An existing install (binary present and reporting the pinned version) is reused.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.328"
PACKAGE="@anthropic-ai/claude-code"

prefix="${1:-${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}/claude-code-${CLAUDE_CODE_VERSION}}"

log() { printf 'install-harness: %s\n' "$*" >&2; }

find_binary() {
    # The package ships a per-platform native binary in an optional dependency; the .bin shim is the fallback.
    local native="$prefix/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    local shim="$prefix/node_modules/.bin/claude"
    if [[ -x "$native" ]]; then
        printf '%s\n' "$native"
    elif [[ -x "$shim" ]]; then
        printf '%s\n' "$shim"
    else
        return 1
    fi
}

installed_version_ok() {
    local bin="$1" out
    out="$("$bin" --version 2>/dev/null)" || return 1
    [[ "$out" == "$CLAUDE_CODE_VERSION"* ]]
}

if bin="$(find_binary)" && installed_version_ok "$bin"; then
    log "already installed: $bin"
    printf '%s\n' "$(cd "$(dirname "$bin")" && pwd -P)/$(basename "$bin")"
    exit 0
fi

command -v npm >/dev/null 2>&1 || { log "npm not found; install Node.js 18+ and npm first"; exit 2; }

mkdir -p "$prefix"
log "installing $PACKAGE@$CLAUDE_CODE_VERSION into $prefix"
# --prefix keeps it out of any global node_modules; no package.json of ours is touched.
npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error \
    "$PACKAGE@$CLAUDE_CODE_VERSION" >&2

if ! bin="$(find_binary)"; then
    log "installed, but no claude binary under $prefix/node_modules"
    exit 2
fi
if ! installed_version_ok "$bin"; then
    log "warning: $bin --version does not report $CLAUDE_CODE_VERSION"
fi
printf '%s\n' "$(cd "$(dirname "$bin")" && pwd -P)/$(basename "$bin")"
