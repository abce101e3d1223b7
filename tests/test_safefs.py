"""safefs: no link followed, no FIFO or device opened, no oversize file read, below a trusted directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dokimi import safefs
from dokimi.safefs import UnsafePathError


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """(trusted run dir, a 'host' file outside it that an attacker would like dokimi to touch)."""
    run = tmp_path / "run"
    run.mkdir()
    secret = tmp_path / "host-secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    return run, secret


def test_a_link_as_the_file_is_replaced_not_written_through(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "grade.stderr").symlink_to(secret)
    safefs.write_text(run / "grade.stderr", "grader output\n", trusted=run)
    assert secret.read_text() == "root only\n"
    assert not (run / "grade.stderr").is_symlink()
    assert (run / "grade.stderr").read_text() == "grader output\n"


def test_a_link_as_a_directory_on_the_way_is_refused(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "sub").symlink_to(secret.parent)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safefs.write_text(run / "sub" / "host-secret", "x", trusted=run)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        safefs.read_bytes(run / "sub" / "host-secret", trusted=run)
    assert secret.read_text() == "root only\n"


def test_reading_a_link_is_refused_and_names_it(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "answer.txt").symlink_to(secret)
    with pytest.raises(UnsafePathError) as caught:
        safefs.read_bytes(run / "answer.txt", trusted=run)
    assert "answer.txt" in str(caught.value) and "symbolic link" in str(caught.value)


def test_a_fifo_is_refused_without_hanging(tree: tuple[Path, Path]) -> None:
    run, _ = tree
    os.mkfifo(run / "result.json")
    with pytest.raises(UnsafePathError, match="FIFO"):
        safefs.read_bytes(run / "result.json", trusted=run)


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError, match="device"):
        safefs.read_plain(Path("/dev/zero"))


def test_an_oversize_file_is_refused_with_its_size(tree: tuple[Path, Path]) -> None:
    run, _ = tree
    (run / "big").write_bytes(b"x" * 2000)
    with pytest.raises(UnsafePathError, match="2000 bytes, over the limit of 1000"):
        safefs.read_bytes(run / "big", trusted=run, limit=1000)
    assert safefs.read_bytes(run / "big", trusted=run, limit=2000) == b"x" * 2000


def test_a_missing_file_is_file_not_found(tree: tuple[Path, Path]) -> None:
    run, _ = tree
    with pytest.raises(FileNotFoundError):
        safefs.read_bytes(run / "nothing", trusted=run)


def test_a_path_outside_the_trusted_directory_is_refused(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    with pytest.raises(UnsafePathError, match="not below"):
        safefs.read_bytes(secret, trusted=run)
    with pytest.raises(UnsafePathError, match="not below"):
        safefs.read_bytes(run / ".." / secret.name, trusted=run)


def test_remove_deletes_a_link_not_its_target(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "workspace").mkdir()
    (run / "workspace" / "escape").symlink_to(secret.parent)
    (run / "home").symlink_to(secret.parent)
    assert safefs.remove(run / "home", trusted=run)
    assert safefs.remove(run / "workspace", trusted=run)
    assert secret.read_text() == "root only\n"
    assert not safefs.remove(run / "workspace", trusted=run)


def test_chown_tree_changes_links_themselves(tree: tuple[Path, Path]) -> None:
    if os.getuid() != 0:
        pytest.skip("chown to another uid needs root")  # CI and this machine run as root
    run, secret = tree
    (run / "ws").mkdir()
    (run / "ws" / "f").write_text("x")
    (run / "ws" / "link").symlink_to(secret)
    safefs.chown_tree(run / "ws", 1000, 1000, trusted=run)
    assert os.lstat(run / "ws" / "link").st_uid == 1000
    assert os.stat(run / "ws" / "f").st_uid == 1000
    assert os.stat(secret).st_uid == 0


def test_copy_tree_copies_links_as_links_and_leaves_out_fifos(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    run, secret = tree
    ws = run / "workspace"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "answer").symlink_to(secret)
    os.mkfifo(ws / "pipe")
    dest_root = tmp_path / "regrade"
    dest_root.mkdir()
    report = safefs.copy_tree(
        ws, dest_root / "workspace", trusted=run, target_trusted=dest_root, max_bytes=1000
    )
    copied = dest_root / "workspace"
    assert (copied / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert os.readlink(copied / "answer") == str(secret)
    assert not (copied / "pipe").exists()
    assert report.skipped == ["pipe: a FIFO (named pipe)"]
    assert (report.files, report.links) == (1, 1)


def test_copy_tree_stops_at_its_size_cap(tree: tuple[Path, Path], tmp_path: Path) -> None:
    run, _ = tree
    (run / "ws").mkdir()
    (run / "ws" / "a").write_bytes(b"x" * 600)
    (run / "ws" / "b").write_bytes(b"x" * 600)
    with pytest.raises(UnsafePathError, match="more than 1000 bytes"):
        safefs.copy_tree(run / "ws", tmp_path / "out", trusted=run, target_trusted=tmp_path, max_bytes=1000)


def test_rename_moves_a_link_as_a_link(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "workspace" / ".git").mkdir(parents=True)
    (run / "workspace" / ".git" / "commondir").symlink_to(secret)
    safefs.rename(run / "workspace" / ".git" / "commondir", run / "agent-git" / "commondir", trusted=run)
    assert os.readlink(run / "agent-git" / "commondir") == str(secret)
    assert secret.read_text() == "root only\n"


def test_open_new_removes_a_planted_link_first(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "grade.stdout").symlink_to(secret)
    fd = safefs.open_new(run / "grade.stdout", trusted=run)
    os.write(fd, b"out")
    os.close(fd)
    assert secret.read_text() == "root only\n"
    assert (run / "grade.stdout").read_bytes() == b"out"


def test_tree_size_counts_regular_files_and_follows_no_link(tree: tuple[Path, Path]) -> None:
    run, secret = tree
    (run / "ws" / "d").mkdir(parents=True)
    (run / "ws" / "d" / "a").write_bytes(b"x" * 100)
    (run / "ws" / "b").write_bytes(b"y" * 50)
    (run / "ws" / "big-link").symlink_to(secret)
    (run / "ws" / "dir-link").symlink_to(secret.parent)
    assert safefs.tree_size(run / "ws", trusted=run, stop_above=10_000) == 150
    assert safefs.tree_size(run / "ws", trusted=run, stop_above=60) > 60


def test_a_rating_export_never_reads_a_link_a_grader_left_in_a_cell(tmp_path: Path) -> None:
    from dokimi.batch import load_batch
    from dokimi.rating.export import cell_text
    from tests.helpers.batches import write_cell

    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    run_dir = write_cell(tmp_path / "batch", "t1", "guidance:raw")
    (run_dir / "answer.txt").symlink_to(secret)
    os.mkfifo(run_dir / "grade.stdout")
    (run_dir / "workspace.diff").write_text("diff\n")
    cell = load_batch(tmp_path / "batch").cells[0]
    assert cell_text(cell, "answer.txt") is None and cell_text(cell, "grade.stdout") is None
    assert cell_text(cell, "workspace.diff") == "diff\n"
