"""File operations on paths an agent or a grader could have written, done without trusting them.

The run directory, the workspace, the agent's config dir and grade-home are written by code dokimi does not
trust, and dokimi may run as root. A symbolic link there must never be followed (the grader would make
``grade.stderr`` a link to ``/etc/shadow`` and dokimi, as root, would write through it), and a FIFO or a
device must never be opened for reading (a FIFO as ``result.json`` hangs the report forever). So every
operation here:

- names a *trusted* directory (dokimi made it and nothing untrusted can replace it: the batch dir, a run
  dir's parent) and a path below it; from the trusted directory on, each component is opened with
  ``openat(..., O_NOFOLLOW)`` from the previous one's descriptor, so no link is followed anywhere below it,
  whatever the link points at and whenever it was made;
- opens files with ``O_NONBLOCK`` and checks the descriptor's type before reading: only regular files are
  read, and only up to a size limit;
- writes atomically (a temporary file, then a rename that replaces a link rather than writing through it);
- copies, chowns and deletes trees without following a link inside them (links are copied as links, other
  special files are left out and counted).

Each refusal is an :class:`UnsafePathError` (a :class:`~dokimi.errors.DokimiError`) whose message names the
path and what was wrong with it, so a caller turns it into one cell's error, never a traceback.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from dokimi.errors import DokimiError

#: What a document reader accepts by default: large enough for any real document, small enough to hold.
DEFAULT_READ_LIMIT = 64 * 1024 * 1024

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafePathError(DokimiError):
    """A path below a trusted directory is not what dokimi made: a link, a FIFO, a device, a directory where
    a file belongs, or a file over its size limit."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def _relative(path: Path, trusted: Path) -> PurePosixPath:
    """``path`` below ``trusted``, lexically (nothing is resolved: resolving would follow the links)."""
    rel = PurePosixPath(os.path.relpath(os.path.abspath(path), os.path.abspath(trusted)))
    if not rel.parts or rel.parts[0] in (".", ".."):
        raise UnsafePathError(f"is not below {trusted}", path=path)
    return rel


def _open_trusted(trusted: Path) -> int:
    try:
        return os.open(trusted, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UnsafePathError("no such directory", path=trusted) from None
    except OSError as exc:
        raise UnsafePathError(f"cannot open directory: {exc.strerror}", path=trusted) from None


def _refusal(dir_fd: int, name: str, shown: Path, wanted: str) -> UnsafePathError:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        what = _kind(mode)
    except OSError:
        what = "not usable"
    return UnsafePathError(f"is {what}, not {wanted}; dokimi does not follow or open it", path=shown)


@contextmanager
def parent_fd(path: Path, *, trusted: Path, create: bool = False) -> Iterator[tuple[int, str]]:
    """A descriptor of ``path``'s directory, reached from ``trusted`` without following any link, and the
    last component's name. With ``create`` missing directories are made (mode 0755)."""
    rel = _relative(path, trusted)
    fd = _open_trusted(trusted)
    shown = trusted
    try:
        for part in rel.parts[:-1]:
            shown = shown / part
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise UnsafePathError("no such directory", path=shown) from None
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refusal(fd, part, shown, "a directory") from None
                raise UnsafePathError(f"cannot open directory: {exc.strerror}", path=shown) from None
            os.close(fd)
            fd = nxt
        yield fd, rel.parts[-1]
    finally:
        os.close(fd)


def lstat(path: Path, *, trusted: Path) -> os.stat_result | None:
    """``lstat`` of ``path`` reached without following links; None when it does not exist."""
    try:
        with parent_fd(path, trusted=trusted) as (fd, name):
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except UnsafePathError as exc:
        if exc.message == "no such directory":
            return None
        raise


def kind(path: Path, *, trusted: Path) -> str | None:
    """What ``path`` is ("a regular file", "a symbolic link", ...), or None when it does not exist."""
    st = lstat(path, trusted=trusted)
    return None if st is None else _kind(st.st_mode)


def read_bytes(path: Path, *, trusted: Path, limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """The content of a regular file, never more than ``limit`` bytes; a link, a FIFO, a device, a
    directory or a larger file is an :class:`UnsafePathError`. A missing file is FileNotFoundError."""
    return _read_fd(_open_for_reading(path, trusted), path, limit)


def _open_for_reading(path: Path, trusted: Path) -> int:
    """A descriptor of ``path`` opened for reading, reached without following a link (not checked to be a
    regular file yet: the caller does, on the descriptor)."""
    with parent_fd(path, trusted=trusted) as (dir_fd, name):
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise _refusal(dir_fd, name, path, "a regular file") from None
            raise UnsafePathError(f"cannot read: {exc.strerror}", path=path) from None
    return fd


def _read_fd(fd: int, path: Path, limit: int) -> bytes:
    """Read a just-opened descriptor: a regular file only, at most ``limit`` bytes; closes ``fd``."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(
                f"is {_kind(st.st_mode)}, not a regular file; dokimi does not read it", path=path
            )
        if st.st_size > limit:
            raise UnsafePathError(
                f"is {st.st_size} bytes, over the limit of {limit} bytes", path=path, hint="make it smaller"
            )
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnsafePathError(f"grew past the limit of {limit} bytes while being read", path=path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def digest(path: Path, *, trusted: Path) -> str:
    """The sha256 of a regular file, read in chunks (no size limit, nothing kept in memory); a link, a FIFO,
    a device or a directory is an :class:`UnsafePathError`, a missing file FileNotFoundError."""
    import hashlib  # here: hashlib's OpenSSL start-up is not for a scan, which hashes nothing

    fd = _open_for_reading(path, trusted)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(
                f"is {_kind(st.st_mode)}, not a regular file; dokimi does not read it", path=path
            )
        os.set_blocking(fd, True)
        sha = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            sha.update(chunk)
        return sha.hexdigest()
    finally:
        os.close(fd)


def read_text(path: Path, *, trusted: Path, limit: int = DEFAULT_READ_LIMIT) -> str:
    """:func:`read_bytes` decoded as UTF-8, with undecodable bytes replaced."""
    return read_bytes(path, trusted=trusted, limit=limit).decode("utf-8", "replace")


def read_plain(path: Path, *, limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """The content of a file the *user* named (on the command line, in their manifest): a link to it is
    followed, as the user meant, but only a regular file is read (a FIFO or ``/dev/zero`` would hang or never
    end) and only up to ``limit`` bytes. For a path an agent or grader could have written, use
    :func:`read_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        if exc.errno == errno.ENXIO:
            raise UnsafePathError("is a socket or a device, not a regular file", path=path) from None
        raise
    return _read_fd(fd, path, limit)


def write_bytes(path: Path, data: bytes, *, trusted: Path, mode: int = 0o644) -> None:
    """Write ``path`` atomically: a new file beside it, then a rename over whatever ``path`` was (a link is
    replaced, never written through; a directory there is an :class:`UnsafePathError`)."""
    with parent_fd(path, trusted=trusted, create=True) as (dir_fd, name):
        existing = _lstat_at(dir_fd, name)
        if existing is not None and stat.S_ISDIR(existing.st_mode):
            raise UnsafePathError("is a directory, not a file; dokimi does not replace it", path=path)
        tmp = f".{name}.dokimi-{os.getpid()}-{os.urandom(4).hex()}"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise


def write_text(path: Path, text: str, *, trusted: Path, mode: int = 0o644) -> None:
    write_bytes(path, text.encode("utf-8"), trusted=trusted, mode=mode)


def append_text(path: Path, text: str, *, trusted: Path, mode: int = 0o644) -> None:
    """Append to ``path`` (made when missing); a link there is replaced by a fresh file, never written
    through, and a FIFO or device is an :class:`UnsafePathError`."""
    with parent_fd(path, trusted=trusted, create=True) as (dir_fd, name):
        existing = _lstat_at(dir_fd, name)
        if existing is not None and stat.S_ISLNK(existing.st_mode):
            os.unlink(name, dir_fd=dir_fd)
        elif existing is not None and not stat.S_ISREG(existing.st_mode):
            raise UnsafePathError(f"is {_kind(existing.st_mode)}, not a regular file", path=path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError("is not a regular file", path=path)
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def open_new(path: Path, *, trusted: Path, mode: int = 0o644) -> int:
    """A fresh file at ``path`` for writing and reading back (whatever was there, a link included, is removed
    first, not followed); returns the descriptor. A directory there is an :class:`UnsafePathError`."""
    with parent_fd(path, trusted=trusted, create=True) as (dir_fd, name):
        _remove_at(dir_fd, name, path, directories=False)
        return os.open(
            name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove_at(dir_fd: int, name: str, shown: Path, *, directories: bool = True) -> bool:
    st = _lstat_at(dir_fd, name)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        if not directories:
            raise UnsafePathError("is a directory, not a file; dokimi does not replace it", path=shown)
        import shutil  # (imported here: the scan reads files through this module and removes none)

        # shutil.rmtree with dir_fd walks by descriptor and never follows a link inside the tree
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def remove(path: Path, *, trusted: Path) -> bool:
    """Delete ``path`` (a file, a link itself, or a whole tree) without following any link; returns whether
    there was something to delete."""
    try:
        with parent_fd(path, trusted=trusted) as (dir_fd, name):
            return _remove_at(dir_fd, name, path)
    except UnsafePathError as exc:
        if exc.message == "no such directory":
            return False
        raise


def rename(source: Path, target: Path, *, trusted: Path) -> None:
    """Move ``source`` to ``target`` (both below ``trusted``), replacing whatever ``target`` was; no link on
    either path is followed (a link is moved as the link)."""
    with parent_fd(source, trusted=trusted) as (src_fd, src_name):
        with parent_fd(target, trusted=trusted, create=True) as (dst_fd, dst_name):
            if _lstat_at(src_fd, src_name) is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", str(source))
            _remove_at(dst_fd, dst_name, target)
            os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


def makedirs(path: Path, *, trusted: Path) -> None:
    """``mkdir -p`` below ``trusted``; a link or a file on the way is an :class:`UnsafePathError`."""
    with parent_fd(path / "_", trusted=trusted, create=True):
        pass


def chown_tree(path: Path, uid: int, gid: int, *, trusted: Path, recursive: bool = True) -> None:
    """``chown -R -h``: ``path`` and everything below it (only ``path`` when not ``recursive``), links changed
    themselves, none followed."""
    with parent_fd(path, trusted=trusted) as (dir_fd, name):
        st = _lstat_at(dir_fd, name)
        if st is None:
            return
        os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        if not recursive or not stat.S_ISDIR(st.st_mode):
            return
        for _root, dirs, files, fd in os.fwalk(name, dir_fd=dir_fd, follow_symlinks=False):
            for entry in (*dirs, *files):
                try:
                    os.chown(entry, uid, gid, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    pass


@dataclass
class CopyReport:
    """What :func:`copy_tree` did: files and links copied, entries left out with the reason."""

    files: int = 0
    links: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def copy_file(source: Path, target: Path, *, trusted: Path, target_trusted: Path, limit: int) -> None:
    """Copy one regular file (never a link's target, never a FIFO or device) to ``target``, atomically."""
    write_bytes(target, read_bytes(source, trusted=trusted, limit=limit), trusted=target_trusted)


def copy_entry(
    source: Path,
    target: Path,
    *,
    trusted: Path,
    target_trusted: Path,
    limit: int,
    owner: tuple[int, int] | None = None,
) -> str | None:
    """Copy one entry as it is: a regular file's content (up to ``limit``), a link as the link (its text,
    unresolved). Returns None when copied, or why not: absent, or a type dokimi does not copy."""
    st = lstat(source, trusted=trusted)
    if st is None:
        return "absent"
    if stat.S_ISREG(st.st_mode):
        copy_file(source, target, trusted=trusted, target_trusted=target_trusted, limit=limit)
    elif stat.S_ISLNK(st.st_mode):
        with parent_fd(source, trusted=trusted) as (src_fd, name):
            text = os.readlink(name, dir_fd=src_fd)
        with parent_fd(target, trusted=target_trusted, create=True) as (dst_fd, dst_name):
            _remove_at(dst_fd, dst_name, target, directories=False)
            os.symlink(text, dst_name, dir_fd=dst_fd)
    else:
        return _kind(st.st_mode)
    if owner is not None:
        with parent_fd(target, trusted=target_trusted) as (dst_fd, dst_name):
            os.chown(dst_name, *owner, dir_fd=dst_fd, follow_symlinks=False)
    return None


def copy_tree(
    source: Path,
    target: Path,
    *,
    trusted: Path,
    target_trusted: Path,
    max_bytes: int,
    owner: tuple[int, int] | None = None,
) -> CopyReport:
    """Copy the tree at ``source`` to ``target`` (which must not exist) without following any link: links
    are copied as links (their text, unresolved), FIFOs, devices and sockets are left out and listed in
    ``skipped``. More than ``max_bytes`` of file content is an :class:`UnsafePathError`. With ``owner``
    every copied entry gets that uid:gid (a regrade's copy belongs to the container user)."""
    report = CopyReport()
    with parent_fd(source, trusted=trusted) as (src_parent, src_name):
        try:
            top = os.open(src_name, _DIR_FLAGS, dir_fd=src_parent)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(errno.ENOENT, "no such directory", str(source)) from None
            raise _refusal(src_parent, src_name, source, "a directory") from None
    try:
        with parent_fd(target, trusted=target_trusted, create=True) as (dst_parent, dst_name):
            os.mkdir(dst_name, 0o755, dir_fd=dst_parent)
            dst_top = os.open(dst_name, _DIR_FLAGS, dir_fd=dst_parent)
        try:
            _copy_dir(top, dst_top, PurePosixPath("."), report, max_bytes, owner)
        finally:
            os.close(dst_top)
    finally:
        os.close(top)
    return report


#: Deeper trees are refused: no real checkout nests this deep, and each level holds two descriptors.
MAX_COPY_DEPTH = 256


def _copy_dir(
    src: int,
    dst: int,
    rel: PurePosixPath,
    report: CopyReport,
    max_bytes: int,
    owner: tuple[int, int] | None,
    depth: int = 0,
) -> None:
    if depth > MAX_COPY_DEPTH:
        raise UnsafePathError(f"is nested more than {MAX_COPY_DEPTH} directories deep", path=str(rel))
    if owner is not None:
        os.fchown(dst, *owner)
    for entry in sorted(os.listdir(src)):
        shown = str(rel / entry)
        st = os.stat(entry, dir_fd=src, follow_symlinks=False)
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            os.mkdir(entry, 0o755, dir_fd=dst)
            s_child = os.open(entry, _DIR_FLAGS, dir_fd=src)
            try:
                d_child = os.open(entry, _DIR_FLAGS, dir_fd=dst)
                try:
                    _copy_dir(s_child, d_child, rel / entry, report, max_bytes, owner, depth + 1)
                finally:
                    os.close(d_child)
            finally:
                os.close(s_child)
        elif stat.S_ISLNK(mode):
            os.symlink(os.readlink(entry, dir_fd=src), entry, dir_fd=dst)
            if owner is not None:
                os.chown(entry, *owner, dir_fd=dst, follow_symlinks=False)
            report.links += 1
        elif stat.S_ISREG(mode):
            report.bytes += st.st_size
            if report.bytes > max_bytes:
                raise UnsafePathError(
                    f"holds more than {max_bytes} bytes of files; dokimi stopped copying it", path=shown
                )
            _copy_regular(src, dst, entry, stat.S_IMODE(mode) & 0o777, owner)
            report.files += 1
        else:
            report.skipped.append(f"{shown}: {_kind(mode)}")


def _copy_regular(s_fd: int, d_fd: int, name: str, mode: int, owner: tuple[int, int] | None) -> None:
    src = os.open(name, _READ_FLAGS, dir_fd=s_fd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):  # swapped after the listing
            raise UnsafePathError(f"{name} changed type while being copied", path=name)
        os.set_blocking(src, True)
        dst = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=d_fd
        )
        try:
            while True:
                chunk = os.read(src, 1 << 20)
                if not chunk:
                    break
                os.write(dst, chunk)
            if owner is not None:
                os.fchown(dst, *owner)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def tree_size(path: Path, *, trusted: Path, stop_above: int) -> int:
    """Bytes of the regular files under ``path``, walked by descriptor without following links; the walk
    stops as soon as the sum passes ``stop_above`` (the result is then just over it)."""
    total = 0
    with parent_fd(path, trusted=trusted) as (dir_fd, name):
        st = _lstat_at(dir_fd, name)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return 0 if st is None or not stat.S_ISREG(st.st_mode) else st.st_size
        for _root, _dirs, files, fd in os.fwalk(name, dir_fd=dir_fd, follow_symlinks=False):
            for entry in files:
                try:
                    entry_st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(entry_st.st_mode):
                    total += entry_st.st_size
            if total > stop_above:
                break
    return total
