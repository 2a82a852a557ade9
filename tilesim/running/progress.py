"""Progress bars: on a terminal only, and never half-drawn before an error.

A bar is drawn on stderr only when stderr is a terminal (a captured log or a pipe gets nothing, not
hundreds of redraws), only after :data:`DELAY_S` (a command that fails its checks at once leaves no
"0%" behind), and it is cleared when it closes (``leave=False``): what is printed after it, the result
or ``tilesim: error: ...``, starts on a clean line.
"""

from __future__ import annotations

import sys

__all__ = ["DELAY_S", "progress_bar"]

DELAY_S = 0.5
"""Seconds before a bar is first drawn (tqdm's ``delay``)."""


def progress_bar(total: int | None, desc: str, unit: str, quiet: bool = False, **kwargs):
    """A tqdm bar on stderr, off when ``quiet`` or when stderr is not a terminal; other tqdm
    arguments (``initial``, ``dynamic_ncols``, ...) pass through."""
    from tqdm import tqdm  # tqdm loads only where a bar is made (start-up time)

    stream = sys.stderr
    on = not quiet and hasattr(stream, "isatty") and stream.isatty()
    kwargs.setdefault("leave", False)
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not on, delay=DELAY_S, **kwargs)
