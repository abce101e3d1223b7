"""A directory as a tar that costs what its data costs: the run directory a Ray node hands back to the driver
(dokimi.runner.ray_executor).

A file the agent made sparse (``truncate -s 2G ~/big``: 2 GiB long, no block on disk) is stored as a PAX
sparse member (GNU sparse format 1.0: a map of its data segments, then the segments), found with
``SEEK_DATA``/``SEEK_HOLE``; Python's tarfile extracts such a member with ``seek``, so its holes are holes on
the driver too. Stored whole, the same file was 2 GiB of zeros to compress on the node and 2.1 GiB of real
disk on the driver. Links are stored as links, never followed; sockets are left out; a FIFO or a device is a
header only (the driver's extraction filter drops it).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
from pathlib import Path
from typing import BinaryIO

__all__ = ["MAX_SEGMENTS", "add_tree", "data_segments"]

MAX_SEGMENTS = 4096
"""A sparse file with more data segments than this is stored whole (its map would be its own burden)."""
MAX_SPARSE_STORED = 8 * 1024**3 - 1
"""The most data a sparse member stores: beyond, tar would need a PAX ``size`` that GNU sparse 1.0 readers
take for the file's real size, so such a file is stored whole."""


def data_segments(fd: int, size: int) -> list[tuple[int, int]] | None:
    """(offset, length) of every data segment of the open file ``fd`` (``size`` bytes long), or None when
    the file system cannot tell data from holes or the file has more than :data:`MAX_SEGMENTS` segments."""
    segments: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after offset: a hole to the end
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            segments.append((start, end - start))
            if len(segments) > MAX_SEGMENTS:
                return None
            offset = end
    except OSError:  # EINVAL: no SEEK_DATA here
        return None
    return segments


class _SparseData(io.RawIOBase):
    """What a sparse member stores: the map (padded to whole tar blocks), then each data segment."""

    def __init__(self, fd: int, header: bytes, segments: list[tuple[int, int]]) -> None:
        self._fd = fd
        self._pieces: list[tuple[bytes | None, int, int]] = [(header, 0, len(header))]
        self._pieces += [(None, start, length) for start, length in segments]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while self._pieces:
            data, start, length = self._pieces[0]
            if length == 0:
                self._pieces.pop(0)
                continue
            want = min(len(buffer), length)
            chunk = data[start : start + want] if data is not None else os.pread(self._fd, want, start)
            if not chunk:  # the file shrank since its map was read: zeros, as its holes read
                chunk = b"\0" * want
            buffer[: len(chunk)] = chunk
            self._pieces[0] = (data, start + len(chunk), length - len(chunk))
            return len(chunk)
        return 0


def _sparse_member(
    info: tarfile.TarInfo, fd: int, st: os.stat_result
) -> tuple[tarfile.TarInfo, BinaryIO] | None:
    """``info`` as a GNU sparse 1.0 member with its data, or None when the file is not sparse (all its
    blocks allocated) or cannot be stored sparse."""
    if st.st_blocks * 512 >= st.st_size:
        return None
    segments = data_segments(fd, st.st_size)
    if segments is None:
        return None
    stored = sum(length for _, length in segments)
    text = f"{len(segments)}\n" + "".join(f"{start}\n{length}\n" for start, length in segments)
    header = text.encode() + b"\0" * (-len(text) % tarfile.BLOCKSIZE)
    if stored + len(header) > MAX_SPARSE_STORED:
        return None
    real_name = info.name
    info.name = f"GNUSparseFile.0/{os.path.basename(real_name)}"
    info.size = len(header) + stored
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": real_name,
        "GNU.sparse.realsize": str(st.st_size),
    }
    return info, io.BufferedReader(_SparseData(fd, header, segments))


def _add_entry(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(path), arcname)
    if info is None:  # a socket
        return
    if not info.isreg() or info.islnk():
        tar.addfile(info)
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone, or replaced by a link since it was listed
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        info.size = st.st_size
        sparse = _sparse_member(info, fd, st)
        if sparse is not None:
            tar.addfile(*sparse)
        else:
            with os.fdopen(os.dup(fd), "rb") as data:
                tar.addfile(info, data)
    finally:
        os.close(fd)


def add_tree(tar: tarfile.TarFile, root: Path, name: str) -> None:
    """``root / name`` and everything under it (links not followed) into ``tar`` as ``name``, sparse files
    as sparse members."""
    top = root / name
    _add_entry(tar, top, name)
    if top.is_symlink() or not top.is_dir():
        return
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames.sort()
        base = Path(directory)
        relative = base.relative_to(top).as_posix()
        arcbase = name if relative == "." else f"{name}/{relative}"
        for entry in [*sorted(dirnames), *sorted(filenames)]:
            _add_entry(tar, base / entry, f"{arcbase}/{entry}")
