"""Package names that load on first use (PEP 562), so that ``tilesim --help`` does not import Numba.

A package lists what it offers, module by module; ``from pkg import f`` imports the module that
defines ``f`` at that moment, and ``import pkg`` alone imports nothing heavy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> tuple[Callable, Callable, list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` offering ``modules[m]`` from module ``m``.

    >>> getattr_, dir_, all_ = lazy_exports("pkg", {"json": ("dumps",)})
    >>> getattr_("dumps")({"a": 1})
    '{"a": 1}'
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where[name]), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, list(where)
