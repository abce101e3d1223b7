"""Run dokimi from a checkout without installing it: `python cli.py repo validate ...`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from dokimi.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
