"""Run dokimi from a checkout without installing it: `python cli.py repo validate ...`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

if __name__ == "__main__":
    try:
        from dokimi.cli.main import main
    except KeyboardInterrupt:  # Ctrl-C while importing: no traceback, the CLI's exit code
        sys.exit(130)
    sys.exit(main())
