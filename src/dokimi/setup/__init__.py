"""Machine setup that ships with the package, so an installed dokimi can prepare its machine: ``dokimi setup``
runs :data:`BASE_IMAGE_SCRIPT` (a running docker daemon and the offline base image)."""

from __future__ import annotations

from pathlib import Path

BASE_IMAGE_SCRIPT = "base_image.sh"
"""Starts the docker daemon when none answers and builds the base image offline from the Debian mirror."""


def script_path(name: str = BASE_IMAGE_SCRIPT) -> Path:
    """Where a setup script is on this machine (inside the installed package)."""
    return Path(__file__).resolve().parent / name
