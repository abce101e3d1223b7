"""The inventory repository of docs/your-repo.md and its tests: a small Python package whose history holds
three fixes, each changing the code and adding a test. Commit dates and authors are fixed, so the SHAs (and
the guide's output that names them) are the same on every machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

INVENTORY = '''\
"""A tiny inventory."""


def total(items):
    """The value of the stock: quantity times price, summed."""
    return sum(item["qty"] for item in items)


def find(items, name):
    """The item called ``name``, whatever its case; None when there is none."""
    for item in items:
        if item["name"] == name:
            return item
    return None


def discounted(price, percent):
    """``price`` less ``percent`` per cent."""
    return price - percent
'''

TESTS = """\
from inventory.core import discounted, find, total

ITEMS = [{"name": "Bolt", "qty": 3, "price": 2.0}, {"name": "Nut", "qty": 10, "price": 0.5}]


def test_total_of_nothing():
    assert total([]) == 0


def test_find_missing():
    assert find(ITEMS, "screw") is None


def test_no_discount():
    assert discounted(80.0, 0) == 80.0
"""

FIXES = [
    (
        "fix_total",
        "Fix total: it counted the pieces instead of their value\n\nStock of 3 bolts at 2.0 came out as 3.\n",
        (
            'return sum(item["qty"] for item in items)',
            'return sum(item["qty"] * item["price"] for item in items)',
        ),
        "\n\ndef test_total_is_quantity_times_price():\n    assert total(ITEMS) == 11.0\n",
    ),
    (
        "fix_find_case",
        "find: ignore case, as documented\n\nLooking up 'bolt' found nothing.\n",
        ('if item["name"] == name:', 'if item["name"].lower() == name.lower():'),
        '\n\ndef test_find_ignores_case():\n    assert find(ITEMS, "bolt")["qty"] == 3\n',
    ),
    (
        "fix_discount",
        "Fix discounted: percent is a percentage\n\nA 25% discount on 80.0 gave 55.0.\n",
        ("return price - percent", "return price * (100 - percent) / 100"),
        "\n\ndef test_discount_is_a_percentage():\n    assert discounted(80.0, 25) == 60.0\n",
    ),
]


AUTHOR = {
    "GIT_AUTHOR_NAME": "Ada Dev",
    "GIT_AUTHOR_EMAIL": "ada@example.invalid",
    "GIT_COMMITTER_NAME": "Ada Dev",
    "GIT_COMMITTER_EMAIL": "ada@example.invalid",
}

FILES = {
    "inventory/__init__.py": "",
    "inventory/core.py": INVENTORY,
    "tests/test_core.py": TESTS,
    "pyproject.toml": '[project]\nname = "inventory"\nversion = "0.1"\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    "AGENTS.md": "# inventory\n\nRun the tests with `python3 -m pytest`.\n",
}


def _git(repo: Path, *args: str, day: int = 1) -> str:
    date = f"2026-01-{day:02d}T12:00:00+00:00"
    env = {**os.environ, **AUTHOR, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def make_inventory(path: Path) -> dict[str, str]:
    """Create the repository at ``path``: the first version, then one commit per fix. Returns task id -> the
    fix commit's SHA."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _write(path, FILES)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "--no-gpg-sign", "-m", "inventory: first version")
    code, tests, shas = INVENTORY, TESTS, {}
    for day, (task_id, message, (old, new), test) in enumerate(FIXES, start=2):
        code, tests = code.replace(old, new), tests + test
        _write(path, {"inventory/core.py": code, "tests/test_core.py": tests})
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "--no-gpg-sign", "-m", message, day=day)
        shas[task_id] = _git(path, "rev-parse", "HEAD").strip()
    return shas
