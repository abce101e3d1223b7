from __future__ import annotations

import sys

from dokimi.cli.main import main

sys.exit(main())
