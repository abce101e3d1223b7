#!/usr/bin/env bash
# Install a pinned harness CLI with npm into a private prefix, then print the absolute path of the file to run
# on stdout (and nothing else on stdout).
#
#   scripts/install-harness.sh                    # Claude Code into ${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}/claude-code-<ver>
#   scripts/install-harness.sh PREFIX             # Claude Code into PREFIX
#   scripts/install-harness.sh codex [PREFIX]     # Codex CLI (its native binary: runs without Node)
#   scripts/install-harness.sh gemini-cli [PREFIX]   # Gemini CLI (a Node script: prints its gemini.js)
#   scripts/install-harness.sh copilot [PREFIX]   # GitHub Copilot CLI (its native binary)
#   scripts/install-harness.sh opencode [PREFIX]  # OpenCode (its native binary)
#   scripts/install-harness.sh qwen-code [PREFIX] # Qwen Code (a Node script: prints its cli-entry.js)
#   scripts/install-harness.sh node [PREFIX]      # the pinned Node runtime Node-based CLIs run on (prints bin/node)
#   scripts/install-harness.sh aider [PREFIX]     # Aider (PyPI aider-chat, with pip, for CPython 3.11: prints aider.py)
#   scripts/install-harness.sh NAME [PREFIX]      # any built-in profile with a pin (src/dokimi/harness/profiles/)
#   DOKIMI_CLAUDE_BIN=$(scripts/install-harness.sh)
#
# The pin of a harness is its built-in profile's `verification` block (src/dokimi/harness/profiles/NAME.yaml:
# version, package, executable), the one place its version is spelled; Node's is the NODE_* lines of
# src/dokimi/harness/runtime.py. `--pin NAME` prints the pin this script read (version, package, executable,
# tab-separated) and installs nothing. The registry is whatever npm (pip for Aider) is configured to use; this
# script never names one.
# An existing install (its package's metadata saying the pinned version) is reused.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
profiles="$root/src/dokimi/harness/profiles"
runtime="$root/src/dokimi/harness/runtime.py"

print_pin=""
if [[ "${1:-}" == "--pin" ]]; then print_pin=1; shift; fi
harness="claude-code"
if [[ -n "${1:-}" && ( -f "$profiles/${1:-}.yaml" || "${1:-}" == node ) ]]; then harness="$1"; shift; fi

pin_field() {  # a field of the profile's verification block
    sed -n '/^verification:/,/^[^ #]/ s/^  '"$1"': *//p' "$profiles/$harness.yaml" | head -1
}
runtime_field() {  # NAME = "value" in runtime.py
    sed -n 's/^'"$1"' = "\(.*\)"$/\1/p' "$runtime" | head -1
}
if [[ "$harness" == node ]]; then
    version="$(runtime_field NODE_VERSION)"; source_="$(runtime_field NODE_PACKAGE)"
    executable="$(runtime_field NODE_EXECUTABLE)"
else
    version="$(pin_field version)"; source_="$(pin_field package)"; executable="$(pin_field executable)"
fi
manager="${source_%% *}"
package="${source_#* }"
if [[ -z "$version" || -z "$executable" || "$manager" == "$source_" ]]; then
    printf 'install-harness: %s has no pin to install (verification: version, package, executable)\n' "$harness" >&2
    exit 2
fi
if [[ -n "$print_pin" ]]; then
    printf '%s\t%s\t%s\n' "$version" "$source_" "$executable"
    exit 0
fi

tools="${DOKIMI_TOOLS:-$HOME/.cache/dokimi/tools}"
prefix="${1:-$tools/$harness-$version}"
bin="$prefix/$executable"

log() { printf 'install-harness: %s\n' "$*" >&2; }

installed_version_ok() {  # the installed package's own metadata, read without running anything
    local out
    if [[ "$manager" == pypi ]]; then
        out="$(sed -n 's/^Version: //p' "$prefix"/site/"${package//-/_}"-*.dist-info/METADATA 2>/dev/null | head -1)"
    else
        out="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$prefix/node_modules/$package/package.json" 2>/dev/null | head -1)"
    fi
    [[ -x "$bin" && "$out" == "$version" ]]
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

if installed_version_ok; then
    log "already installed: $bin"
    [[ "$harness" != "aider" ]] || write_aider_launcher
    absolute "$bin"
    exit 0
fi

if [[ "$manager" == pypi ]]; then
    install_aider
    installed_version_ok || log "warning: $prefix/site does not hold $package $version"
    absolute "$bin"
    exit 0
fi

command -v npm >/dev/null 2>&1 || { log "npm not found; install npm first (the CLIs and Node come from npm)"; exit 2; }

mkdir -p "$prefix"
log "installing $package@$version into $prefix"
# --prefix keeps it out of any global node_modules; no package.json of ours is touched.
npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error "$package@$version" >&2

if [[ ! -x "$bin" ]]; then
    log "installed, but $executable is not under $prefix"
    exit 2
fi
installed_version_ok || log "warning: $prefix/node_modules/$package is not version $version"
absolute "$bin"
