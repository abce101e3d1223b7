"""What an image build takes from this machine (image.build.from_host), read from real files: pip's settings
as pip reads them, proxies in both cases, only certificates from CA files, and the secret's shell text run by
a real ``sh`` (the tests of the build itself are in tests/e2e/test_your_repo_dependencies.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dokimi.errors import UsageError
from dokimi.sandbox.hostconfig import (
    ca_bundle,
    ca_files_of,
    host_build_config,
    host_proxies,
    host_script,
    is_loopback_proxy,
    pip_settings,
)
from tests.helpers.pkgindex import make_ca_and_server_cert


def test_pip_settings_are_read_as_pip_reads_them_and_host_only_indexes_are_left_out(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://mirror.example/simple\nextra-index-url = file:///opt/pypi/simple\n"
        "    https://extra.example/simple\ntrusted-host = mirror.example\nfind-links = /opt/wheels\n"
        "[install]\ntimeout = 60\n"
    )
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_DIRS": str(tmp_path / "none"),
               "PIP_CONFIG_FILE": str(conf), "PIP_RETRIES": "3"}  # fmt: skip
    settings, notes = pip_settings(environ)
    assert settings == {
        "index-url": "https://mirror.example/simple",
        "extra-index-url": "https://extra.example/simple",
        "trusted-host": "mirror.example",
        "timeout": "60",
        "retries": "3",
    }
    assert notes == [
        "pip extra-index-url: an index on this machine's disk is left out (a build cannot read it)"
    ]
    assert pip_settings({**environ, "PIP_INDEX_URL": "https://env.example/simple"})[0]["index-url"] == (
        "https://env.example/simple"
    )
    assert pip_settings({**environ, "PIP_CONFIG_FILE": os.devnull})[0] == {"retries": "3"}


def test_proxies_go_in_both_cases_and_a_loopback_proxy_is_noticed() -> None:
    proxies = host_proxies({"https_proxy": "http://127.0.0.1:3128", "NO_PROXY": "localhost"})
    assert proxies == {
        "HTTPS_PROXY": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
        "NO_PROXY": "localhost", "no_proxy": "localhost",
    }  # fmt: skip
    assert is_loopback_proxy("http://127.0.0.1:3128") and is_loopback_proxy("localhost:8080")
    assert is_loopback_proxy("http://[::1]:3128") and not is_loopback_proxy("http://proxy.corp:3128")
    config = host_build_config(["proxy"], [], {"HTTP_PROXY": "http://localhost:3128"})
    assert config.loopback_proxy and config.script is None
    assert config.notes == ["proxy: HTTP_PROXY"]  # names, never values


def test_only_certificates_are_read_from_a_ca_file_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    ca, _, key = make_ca_and_server_cert(tmp_path / "pki", "index.test")
    mixed = tmp_path / "mixed.pem"
    mixed.write_bytes(key.read_bytes() + ca.read_bytes())
    bundle = ca_bundle(ca_files_of({}, [str(mixed)]))
    assert b"PRIVATE KEY" not in bundle and ca.read_bytes().strip() in bundle
    with pytest.raises(UsageError, match="not a file on this machine"):
        ca_files_of({}, [str(tmp_path / "absent.pem")])
    with pytest.raises(UsageError, match="holds no PEM certificate"):
        ca_files_of({}, [str(key)])


def test_the_secret_sets_each_tool_up_and_leaves_nothing_behind(tmp_path: Path) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"
    script = host_script(
        {"index-url": "https://mirror.example/simple?token=a b'c", "trusted-host": "mirror.example"},
        {"http": "http://proxy.corp:3128"},
        pem,
    )
    secret = tmp_path / "dokimi-host"
    secret.write_text(script)
    run = '. "$1" && echo "$PIP_INDEX_URL|$UV_INDEX_URL|$PIP_TRUSTED_HOST"'
    run += ' && cat "$SSL_CERT_FILE" "$APT_CONFIG"'
    argv = ["sh", "-c", run + ' && echo "$PIP_CERT" > "$0"', str(tmp_path / "where"), str(secret)]
    lines = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()
    url = "https://mirror.example/simple?token=a b'c"
    assert lines[0] == f"{url}|{url}|mirror.example"
    assert "\n".join(lines[1:4]) == pem.decode().strip()
    assert 'Acquire::http::Proxy "http://proxy.corp:3128";' in lines
    assert any(line.startswith('Acquire::https::CaInfo "') for line in lines)
    used = Path((tmp_path / "where").read_text().strip())
    assert used.name == "ca.pem" and not used.parent.exists()  # removed when the RUN's shell exited
