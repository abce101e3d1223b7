"""dokimi: measure coding agents on real repositories, and whether the repository's guidance helps them.

Library callers use the names in ``__all__``; everything else may change. Imports are lazy so that
``import dokimi`` (and so the CLI's start) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "DokimiError",
    "__version__",
    "install_signal_handlers",
    "read_document",
    "write_document",
]

_LAZY = {
    "DokimiError": "dokimi.errors",
    "install_signal_handlers": "dokimi.process",
    "read_document": "dokimi.schemas._base",
    "write_document": "dokimi.schemas._base",
}

if TYPE_CHECKING:
    from dokimi.errors import DokimiError
    from dokimi.process import install_signal_handlers
    from dokimi.schemas._base import read_document, write_document


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dokimi' has no attribute {name!r}")
    import importlib  # here: only a lazy name's first use needs it

    return getattr(importlib.import_module(module), name)
