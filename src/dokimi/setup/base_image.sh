#!/usr/bin/env bash
# Prepare this machine for dokimi's docker tests: a running docker daemon and the
# offline base image dokimi-base:bookworm.
#
# Idempotent: a second run finds the daemon answering and the image present with
# the same package list, and returns in about a second.
#
# No container registry is reachable from the machines dokimi is developed on, so
# the base image is built with debootstrap from the Debian mirror named in the
# machine's own apt sources and imported with `docker import`.
#
# Environment overrides:
#   DOKIMI_BASE_IMAGE   image name (default dokimi-base:bookworm)
#   DOKIMI_MIRROR       Debian mirror URL (default: read from /etc/apt/sources*)
#   DOKIMI_DOCKERD_LOG  dockerd log file (default /var/log/dokimi-dockerd.log)
set -euo pipefail

readonly SUITE=bookworm
readonly IMAGE="${DOKIMI_BASE_IMAGE:-dokimi-base:${SUITE}}"
# The one list of packages in the base image. It is recorded as the image label
# org.dokimi.base.packages, so changing it here rebuilds the image on the next run. pip and venv are
# there so that a repository's Dockerfile can install its dependencies (Debian's python3 refuses a
# system-wide pip install: a venv, python3 -m venv /opt/venv, is the way).
readonly PACKAGES="python3,python3-pytest,python3-pip,python3-venv,git,ca-certificates,procps"
readonly LABEL_KEY="org.dokimi.base.packages"
readonly DOCKERD_LOG="${DOKIMI_DOCKERD_LOG:-/var/log/dokimi-dockerd.log}"
readonly DOCKER_WAIT_S=60

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    log "installing with apt: $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

# --- docker daemon ---------------------------------------------------------

ensure_docker() {
    if docker info >/dev/null 2>&1; then
        log "docker daemon answers"
        return
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        apt_install docker.io
    fi
    command -v docker >/dev/null 2>&1 || die "no docker client after installing docker.io"
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "dockerd is running but not answering yet; waiting"
    else
        log "starting dockerd in the background (log: ${DOCKERD_LOG})"
        mkdir -p "$(dirname "${DOCKERD_LOG}")" 2>/dev/null || true
        # setsid: the daemon outlives this script and the shell that ran it.
        as_root setsid nohup dockerd >>"${DOCKERD_LOG}" 2>&1 </dev/null &
    fi
    local waited=0
    until [[ -S /var/run/docker.sock ]] && docker info >/dev/null 2>&1; do
        if (( waited >= DOCKER_WAIT_S )); then
            tail -n 20 "${DOCKERD_LOG}" >&2 2>/dev/null || true
            die "docker did not answer within ${DOCKER_WAIT_S}s; see ${DOCKERD_LOG}"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "docker daemon answers after ${waited}s"
}

# --- Debian mirror from the machine's apt sources ---------------------------

# Print the URI of an enabled deb source for SUITE, preferring a plain Debian archive (a path ending in
# /debian) over any other source that carries the suite. Exact suite match: bookworm-security does not count.
debian_mirror() {
    if [[ -n "${DOKIMI_MIRROR:-}" ]]; then
        printf '%s\n' "${DOKIMI_MIRROR}"
        return
    fi
    local files=() f found
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] && files+=("$f")
    done
    (( ${#files[@]} )) || die "no apt sources in /etc/apt; set DOKIMI_MIRROR=<debian mirror url>"
    # One awk over every file, no pipeline: nothing here can die of SIGPIPE under pipefail.
    found="$(awk -v suite="${SUITE}" '
        function offer(uri) {
            if (uri ~ /\/debian\/?$/ && preferred == "") preferred = uri
            if (any == "") any = uri
        }
        function flush(   n, i, u) {
            if (types ~ /(^|[ \t])deb([ \t]|$)/ && (" " suites " ") ~ ("[ \t]" suite "[ \t]")) {
                n = split(uris, u, /[ \t]+/)
                for (i = 1; i <= n; i++) if (u[i] != "") offer(u[i])
            }
            types = ""; suites = ""; uris = ""
        }
        FNR == 1 { flush() }
        /^[ \t]*#/ { next }       # a comment line (inside a deb822 stanza, it does not end the stanza)
        { sub(/#.*/, "") }
        FILENAME ~ /\.sources$/ {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            if (sub(/^Types:[ \t]*/, ""))  types = $0
            if (sub(/^Suites:[ \t]*/, "")) suites = $0
            if (sub(/^URIs:[ \t]*/, ""))   uris = $0
            next
        }
        {
            gsub(/\[[^]]*\]/, "")
            if ($1 == "deb" && $3 == suite) offer($2)
        }
        END { flush(); print (preferred != "" ? preferred : any) }
    ' "${files[@]}")" || found=""
    [[ -n "${found}" ]] || die "no deb source for ${SUITE} in /etc/apt/sources.list*; set DOKIMI_MIRROR=<url>"
    printf '%s\n' "${found}"
}

# --- base image --------------------------------------------------------------

image_packages() {
    docker image inspect -f "{{ index .Config.Labels \"${LABEL_KEY}\" }}" "${IMAGE}" 2>/dev/null || true
}

ensure_base_image() {
    local have
    have="$(image_packages)"
    if [[ "${have}" == "${PACKAGES}" ]]; then
        log "image ${IMAGE} exists with packages ${PACKAGES}; reusing it"
        return
    fi
    if [[ -n "${have}" ]]; then
        log "image ${IMAGE} has packages '${have}', want '${PACKAGES}'; rebuilding"
    fi
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
    local mirror rootfs started
    mirror="$(debian_mirror)"
    rootfs="$(mktemp -d "${TMPDIR:-/var/tmp}/dokimi-rootfs.XXXXXX")"
    # shellcheck disable=SC2064  # expand rootfs now: the trap must remove this directory
    trap "as_root rm -rf --one-file-system '${rootfs}'" EXIT
    started=${SECONDS}
    log "debootstrap ${SUITE} from ${mirror} with ${PACKAGES} into ${rootfs}"
    as_root debootstrap --variant=minbase --include="${PACKAGES}" "${SUITE}" "${rootfs}" "${mirror}" \
        >"${rootfs}.log" 2>&1 || { tail -n 30 "${rootfs}.log" >&2; die "debootstrap failed (log: ${rootfs}.log)"; }
    rm -f "${rootfs}.log"
    # Drop what a container never needs: apt lists and caches, docs.
    as_root rm -rf "${rootfs}/var/cache/apt/archives/"*.deb "${rootfs}/var/lib/apt/lists/"* \
        "${rootfs}/usr/share/doc" "${rootfs}/usr/share/man"
    log "importing ${rootfs} as ${IMAGE}"
    as_root tar --numeric-owner -C "${rootfs}" -c . | docker import \
        --change "LABEL ${LABEL_KEY}=${PACKAGES}" \
        --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "ENV LANG=C.UTF-8" \
        --change 'CMD ["/bin/bash"]' \
        - "${IMAGE}" >/dev/null
    as_root rm -rf --one-file-system "${rootfs}"
    trap - EXIT
    log "built ${IMAGE} in $((SECONDS - started))s"
}

check_base_image() {
    docker run --rm --network none "${IMAGE}" sh -c \
        'python3 -c "import pytest" && python3 -m pip --version && python3 -m venv /tmp/venv' >/dev/null \
        || die "${IMAGE} lacks pytest, pip or venv; remove it (docker rmi ${IMAGE}) and run again"
    log "${IMAGE} runs python3 with pytest, pip and venv"
}

main() {
    ensure_docker
    ensure_base_image
    check_base_image
}

main "$@"
