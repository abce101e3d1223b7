"""Fixtures of the runner tests."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def image_id() -> Iterator[str]:
    """A manifest id of the test's own, so an image of its own: other sessions on the shared daemon build and
    remove the tiny repository's (runner-tiny). Its images are removed afterwards."""
    name = f"own-{uuid.uuid4().hex[:10]}"
    yield name
    listed = subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=dokimi.repo.manifest-id={name}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.stdout.split():
        subprocess.run(["docker", "rmi", "-f", *set(listed.stdout.split())], capture_output=True, check=False)
