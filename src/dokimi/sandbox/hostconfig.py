"""This machine's package configuration, for an image build only (the manifest's ``image.build``).

A user whose machine reaches package indexes through a proxy, a private index or an intercepting CA expects
``docker build`` to work the way ``pip install`` does on the machine. dokimi passes that configuration to the
build, and never into the image:

- :func:`host_proxies` (``proxy``): HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY and FTP_PROXY, each in both
  cases, as docker's predefined build arguments: a RUN sees them as variables, and docker leaves them out of
  the image's history and configuration;
- :func:`pip_settings` (``pip``): pip's index, extra indexes, trusted hosts, timeout and retries, from its
  configuration files and PIP_* variables, as pip reads them; an index on this machine's disk
  (``file://``) means nothing in a container and is left out, with a note;
- :func:`apt_proxies` (``apt``): apt's configured proxies (``apt-config dump``), else the proxy variables;
- :func:`ca_bundle` (``ca``): the usual CA bundle plus the certificates this machine adds
  (``/usr/local/share/ca-certificates``, ``/etc/pki/ca-trust/source/anchors``, pip's ``cert``,
  SSL_CERT_FILE, REQUESTS_CA_BUNDLE, ``ca_files``); only ``CERTIFICATE`` blocks are read, so a file that
  holds a private key passes none of it on.

:func:`host_script` renders ``pip``, ``apt`` and ``ca`` as one POSIX shell file, the BuildKit secret
``dokimi-host``: a RUN that sources it (``. /run/secrets/dokimi-host``) gets PIP_*, UV_*, the CA variables
of pip, requests, curl, git and Node, and APT_CONFIG, all pointing at files in a temporary directory the
RUN's shell removes when it exits (in /dev/shm, which no layer holds). A secret is mounted for that one
RUN only and is never written to a layer.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import shlex
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from dokimi import process
from dokimi.errors import DokimiError, UsageError

SECRET_ID = "dokimi-host"
"""The BuildKit secret a Dockerfile mounts: ``RUN --mount=type=secret,id=dokimi-host``."""
PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "FTP_PROXY")
"""docker's predefined build arguments (each also in lower case): a RUN sees them, the history does not."""
PIP_KEYS = ("index-url", "extra-index-url", "trusted-host", "timeout", "retries")
EXTRA_CA_DIRS = ("/usr/local/share/ca-certificates", "/etc/pki/ca-trust/source/anchors")
CA_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
PEM_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----")
MAX_CA_FILE_BYTES = 8 << 20


@dataclass
class HostBuildConfig:
    """What one build gets from this machine: build arguments, the secret's text, and notes for the user."""

    build_args: dict[str, str] = field(default_factory=dict)
    """``--build-arg`` values (proxies only: docker keeps them out of the image's history)."""
    script: str | None = None
    """The ``dokimi-host`` secret, or None when ``image.build.from_host`` names neither pip, apt nor ca."""
    notes: list[str] = field(default_factory=list)
    """What was passed and what was left out, without any value (a URL may carry a token)."""
    loopback_proxy: bool = False
    """A proxy is on this machine's loopback: only a build on the host's network reaches it."""


def host_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """Each proxy variable set in ``environ``, under both its upper- and lower-case name (docker's predefined
    build arguments; a tool reads one case or the other)."""
    out: dict[str, str] = {}
    for name in PROXY_NAMES:
        value = environ.get(name) or environ.get(name.lower())
        if value:
            out[name] = value
            out[name.lower()] = value
    return out


def is_loopback_proxy(url: str) -> bool:
    """Whether a proxy URL names this machine's loopback (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pip_config_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files in the order pip reads them (a later one wins): global, user, then the file
    PIP_CONFIG_FILE names (``os.devnull`` there means none at all)."""
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = Path(environ.get("HOME") or Path.home())
    xdg = environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in dirs.split(":") if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", Path(xdg) / "pip" / "pip.conf"]
    if named:
        files.append(Path(named).expanduser())
    return files


def pip_config(environ: Mapping[str, str]) -> configparser.RawConfigParser:
    """pip's configuration files read in pip's order (a file that cannot be read is passed over)."""
    parser = configparser.RawConfigParser()
    for path in pip_config_files(environ):
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
    return parser


def _host_only(value: str) -> bool:
    """A location only this machine can read: a ``file:`` URL or a path."""
    return value.startswith(("file:", "/", "~", "."))


def pip_settings(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """pip's index settings as pip would use them for ``pip install`` on this machine (PIP_* variables over
    the files, ``[install]`` over ``[global]``), with the values only this machine can use left out; and
    the notes saying what was left out."""
    parser = pip_config(environ)
    settings: dict[str, str] = {}
    for section in ("global", "install"):
        if parser.has_section(section):
            for key in PIP_KEYS:
                if parser.has_option(section, key):
                    settings[key] = " ".join(parser.get(section, key).split())
    for key in PIP_KEYS:
        value = environ.get("PIP_" + key.upper().replace("-", "_"))
        if value:
            settings[key] = " ".join(value.split())
    notes: list[str] = []
    for key in ("index-url", "extra-index-url"):
        if key in settings:
            kept = [v for v in settings[key].split() if not _host_only(v)]
            if len(kept) < len(settings[key].split()):
                notes.append(
                    f"pip {key}: an index on this machine's disk is left out (a build cannot read it)"
                )
            settings[key] = " ".join(kept)
    return {k: v for k, v in settings.items() if v}, notes


def pip_cert(environ: Mapping[str, str]) -> str | None:
    """pip's ``cert`` setting (PIP_CERT, else its configuration files)."""
    if environ.get("PIP_CERT"):
        return environ["PIP_CERT"]
    parser = pip_config(environ)
    for section in ("install", "global"):
        if parser.has_option(section, "cert"):
            return parser.get(section, "cert").strip()
    return None


def apt_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """apt's proxies: ``Acquire::http::Proxy`` and ``Acquire::https::Proxy`` as ``apt-config dump`` shows
    them on this machine, else the proxy variables apt itself would use."""
    found: dict[str, str] = {}
    try:
        dumped = process.run(["apt-config", "dump"], timeout=30).stdout
    except DokimiError:  # no apt on this machine: the variables below
        dumped = ""
    for scheme in ("http", "https"):
        match = re.search(rf'^Acquire::{scheme}::Proxy "([^"]+)";$', dumped, re.M | re.I)
        if match and match.group(1).upper() not in ("DIRECT", "FALSE"):
            found[scheme] = match.group(1)
    proxies = host_proxies(environ)
    for scheme in ("http", "https"):
        if scheme not in found and proxies.get(f"{scheme}_proxy"):
            found[scheme] = proxies[f"{scheme}_proxy"]
    return found


def _certificates(data: bytes) -> list[bytes]:
    return [m.group(0).replace(b"\r\n", b"\n") for m in PEM_CERTIFICATE.finditer(data)]


def _read_certificates(path: Path) -> list[bytes]:
    try:
        with open(path, "rb") as handle:
            return _certificates(handle.read(MAX_CA_FILE_BYTES))
    except OSError:
        return []


def ca_files_of(environ: Mapping[str, str], named: Sequence[str]) -> list[Path]:
    """The files whose certificates the build trusts: this machine's usual bundle, its added CAs, the files
    pip and the TLS variables name, and ``named`` (``~`` and ``$VAR`` expanded). A named file that does not
    exist is a usage error: the build would fail later and less clearly."""
    files: list[Path] = []
    default = ssl.get_default_verify_paths()
    for candidate in (default.cafile, default.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            files.append(Path(candidate))
            break
    for directory in EXTRA_CA_DIRS:
        root = Path(directory)
        if root.is_dir():
            files += sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".crt", ".pem"))
    for value in (pip_cert(environ), *(environ.get(name) for name in CA_VARIABLES)):
        if value and Path(value).is_file():
            files.append(Path(value))
    for raw in named:
        path = Path(os.path.expandvars(os.path.expanduser(raw)))
        if not path.is_file():
            raise UsageError(
                f"image.build.ca_files: {raw} is not a file on this machine",
                hint="name a PEM file of CA certificates (absolute, ~/..., or $VAR/...)",
            )
        if not _read_certificates(path):
            raise UsageError(
                f"image.build.ca_files: {raw} holds no PEM certificate",
                hint="give the CA's certificate (-----BEGIN CERTIFICATE-----), not a key or a DER file",
            )
        files.append(path)
    return list(dict.fromkeys(files))


def ca_bundle(files: Iterable[Path]) -> bytes:
    """Every distinct certificate of ``files``, in order, as one PEM bundle (nothing but certificates)."""
    seen: dict[bytes, None] = {}
    for path in files:
        for certificate in _read_certificates(path):
            seen.setdefault(certificate, None)
    return b"".join(c + b"\n" for c in seen)


def _heredoc(name: str, text: str) -> str:
    marker = "DOKIMI_EOF"
    while marker in text:
        marker += "_"
    return f"cat > \"$dokimi_host/{name}\" <<'{marker}'\n{text.rstrip()}\n{marker}\n"


def host_script(pip: Mapping[str, str], apt: Mapping[str, str], bundle: bytes | None) -> str:
    """The ``dokimi-host`` secret: POSIX shell a RUN sources. Its files live in a directory of /dev/shm (else
    /tmp) that the RUN's shell removes when it exits, so no layer holds them."""
    lines = [
        "# dokimi: this machine's package configuration, for this RUN only (docs/your-repo.md#dependencies)",
        "dokimi_host=$(mktemp -d /dev/shm/dokimi-host.XXXXXX 2>/dev/null || mktemp -d)",
        "trap 'rm -rf \"$dokimi_host\"' EXIT",
    ]
    env: dict[str, str] = {}
    if "index-url" in pip:
        env["PIP_INDEX_URL"] = env["UV_INDEX_URL"] = pip["index-url"]
    if "extra-index-url" in pip:
        env["PIP_EXTRA_INDEX_URL"] = env["UV_EXTRA_INDEX_URL"] = pip["extra-index-url"]
    if "trusted-host" in pip:
        env["PIP_TRUSTED_HOST"] = env["UV_INSECURE_HOST"] = pip["trusted-host"]
    for key in ("timeout", "retries"):
        if key in pip:
            env[f"PIP_{key.upper()}"] = pip[key]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    if bundle:
        lines.append(_heredoc("ca.pem", bundle.decode("ascii")).rstrip())
        for name in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
                     "NODE_EXTRA_CA_CERTS"):  # fmt: skip
            lines.append(f'export {name}="$dokimi_host/ca.pem"')
    if apt or bundle:
        conf = [f'Acquire::{scheme}::Proxy "{url}";' for scheme, url in sorted(apt.items())]
        lines.append(_heredoc("apt.conf", "\n".join(conf)).rstrip())
        if bundle:
            lines.append(
                'echo "Acquire::https::CaInfo \\"$dokimi_host/ca.pem\\";" >> "$dokimi_host/apt.conf"'
            )
        lines.append('export APT_CONFIG="$dokimi_host/apt.conf"')
    return "\n".join(lines) + "\n"


def host_build_config(
    from_host: Sequence[str], ca_files: Sequence[str], environ: Mapping[str, str] | None = None
) -> HostBuildConfig:
    """Everything ``image.build`` asks this machine for (see the module docstring)."""
    environ = os.environ if environ is None else environ
    config = HostBuildConfig()
    wanted = set(from_host)
    if "proxy" in wanted:
        config.build_args = host_proxies(environ)
        names = sorted({name.upper() for name in config.build_args})
        config.notes.append(f"proxy: {', '.join(names) or 'none set'}")
        config.loopback_proxy = any(
            is_loopback_proxy(value) for key, value in config.build_args.items() if key.upper() != "NO_PROXY"
        )
    if not wanted & {"pip", "apt", "ca"}:
        return config
    pip: dict[str, str] = {}
    if "pip" in wanted:
        pip, left_out = pip_settings(environ)
        config.notes += left_out
        config.notes.append(f"pip: {', '.join(sorted(pip)) or 'no index settings'}")
    apt = apt_proxies(environ) if "apt" in wanted else {}
    if "apt" in wanted:
        config.notes.append(f"apt: {', '.join(f'{s} proxy' for s in sorted(apt)) or 'no proxy'}")
    bundle = None
    if "ca" in wanted:
        bundle = ca_bundle(ca_files_of(environ, ca_files))
        config.notes.append(f"ca: {bundle.count(b'BEGIN CERTIFICATE')} certificate(s)")
    config.script = host_script(pip, apt, bundle)
    return config
