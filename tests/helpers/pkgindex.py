"""A package index as a machine behind a corporate proxy sees one, all on loopback: a pip simple index served
over HTTPS with a certificate of a CA of its own (made here with ``openssl``), reached only through a CONNECT
proxy that knows the index's host name. pip gets there only with the proxy and the CA; without the CA it stops
at CERTIFICATE_VERIFY_FAILED, as on the machine that filed the issue.

The wheels are made here too (pure Python, a RECORD with each file's hash), so nothing leaves this machine.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import io
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

INDEX_HOST = "pypi.dokimi.test"


@dataclass
class PackageIndex:
    ca: Path
    """The CA's certificate (PEM): what the build must trust."""
    index_url: str
    """``https://pypi.dokimi.test/simple``: reachable through the proxy only."""
    proxy_url: str
    """``http://127.0.0.1:<port>``."""
    wheels: dict[str, tuple[str, str]]
    """Project name -> (wheel file name, sha256)."""
    connects: list[str] = field(default_factory=list)
    """Every CONNECT target the proxy was asked for."""


def make_wheel(name: str, version: str, files: Mapping[str, str]) -> tuple[str, bytes]:
    """A pure-Python wheel of ``files`` (path -> text): (file name, bytes)."""
    dist = f"{name}-{version}.dist-info"
    entries = {
        **{path: text.encode() for path, text in files.items()},
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: dokimi-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    entries[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in entries.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def make_ca_and_server_cert(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key): a CA of its own and a certificate for ``host``."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=dokimi test proxy CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", f"/CN={host}", cwd=directory)  # fmt: skip
    (directory / "server.ext").write_text(
        f"subjectAltName=DNS:{host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=directory)  # fmt: skip
    return directory / "ca.pem", directory / "server.pem", directory / "server.key"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _pipe(a: socket.socket, b: socket.socket) -> None:
    sockets = [a, b]
    try:
        while True:
            readable, _, _ = select.select(sockets, [], [], 30)
            if not readable:
                return
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                (b if source is a else a).sendall(data)
    except OSError:
        return


@contextlib.contextmanager
def package_index(root: Path, wheels: Mapping[str, tuple[str, bytes]]) -> Iterator[PackageIndex]:
    """Serve ``wheels`` (project -> (file name, bytes)) as a simple index over HTTPS, behind a CONNECT
    proxy."""
    if shutil.which("openssl") is None:
        raise AssertionError("openssl is needed to make the test CA")
    ca, cert, key = make_ca_and_server_cert(root / "pki", INDEX_HOST)
    docroot = root / "index"
    files: dict[str, tuple[str, str]] = {}
    for project, (filename, data) in wheels.items():
        (docroot / "files").mkdir(parents=True, exist_ok=True)
        (docroot / "files" / filename).write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        files[project] = (filename, sha)
        page = docroot / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            f'<html><body><a href="../../files/{filename}#sha256={sha}">{filename}</a></body></html>\n'
        )
    handler = lambda *a, **k: _Quiet(*a, directory=str(docroot), **k)  # noqa: E731
    index = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    index.socket = context.wrap_socket(index.socket, server_side=True)
    index_port = index.server_address[1]
    connects: list[str] = []

    class Connect(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, target = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")[:2]
            connects.append(f"{method} {target}")
            if method != "CONNECT" or target.rsplit(":", 1)[0] != INDEX_HOST:
                self.request.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            upstream = socket.create_connection(("127.0.0.1", index_port))
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with upstream:
                _pipe(self.request, upstream)

    proxy = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Connect)
    proxy.daemon_threads = True
    index.daemon_threads = True
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (index, proxy)]
    for thread in threads:
        thread.start()
    try:
        yield PackageIndex(
            ca=ca,
            index_url=f"https://{INDEX_HOST}/simple",
            proxy_url=f"http://127.0.0.1:{proxy.server_address[1]}",
            wheels=files,
            connects=connects,
        )
    finally:
        for server in (index, proxy):
            server.shutdown()
            server.server_close()
