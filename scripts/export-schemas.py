#!/usr/bin/env python3
"""Write schemas/<name>.schema.json for every document in dokimi.schemas.SCHEMAS (--check: compare only).

Same as ``python -m dokimi.schemas.export``; see that module for the file-name rule.
"""

from __future__ import annotations

import sys

from dokimi.schemas.export import main

if __name__ == "__main__":
    sys.exit(main())
