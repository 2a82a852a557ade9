"""Memos bounded by bytes, for caches a long search keeps between candidates."""

from __future__ import annotations

from cachetools import LRUCache

__all__ = ["BytesLRU", "lru_in"]


class BytesLRU(LRUCache):
    """Least-recently-used memo of at most ``maxsize`` bytes (``getsizeof`` of each value); a
    value larger than the whole budget is not kept (cachetools would raise)."""

    def __setitem__(self, key, value):
        try:
            super().__setitem__(key, value)
        except ValueError:  # larger than the whole budget
            pass


def lru_in(cache: dict, kind, maxsize: int, getsizeof) -> BytesLRU:
    """The :class:`BytesLRU` kept in a caller's ``cache`` dict under ``kind`` (made on first use)."""
    lru = cache.get(kind)
    if lru is None:
        lru = cache[kind] = BytesLRU(maxsize, getsizeof=getsizeof)
    return lru
