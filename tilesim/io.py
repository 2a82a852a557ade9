"""Crash-safe file output: write to a temporary file beside the target, then rename."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as ``tomli`` before it joined the standard library
    import tomli as tomllib

from tilesim.errors import ConfigError, config_message


def loads_toml(text: str) -> dict:
    """Parse TOML text (``tomllib`` on Python 3.11+, ``tomli`` on 3.10); raises ``TOMLDecodeError``."""
    return tomllib.loads(text)


def read_toml(path, what: str) -> dict:
    """Parse a TOML file; a missing file or broken syntax is a :class:`ConfigError` naming ``what``."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(config_message(what, str(path), "no such file"))
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(config_message(what, str(path), f"is not valid TOML ({exc})",
                                         "fix the syntax at the position given")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(config_message(what, str(path), f"cannot be read ({exc})")) from None


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader never sees a half-written file."""
    return atomic_write_bytes(path, text.encode())


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and a rename (nothing half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
