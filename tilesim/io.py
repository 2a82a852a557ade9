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
        raise ConfigError(config_message(what, str(path), "no such file", "check the path"))
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            config_message(what, str(path), f"is not valid TOML ({exc})", "fix the syntax at the position given")
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            config_message(
                what, str(path), f"cannot be read ({exc})", "check its permissions and that it is UTF-8 text"
            )
        ) from None


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


# ---- output paths: checked before any work starts -------------------------------------------
def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and not p.is_symlink():
        if p.parent == p:
            break
        p = p.parent
    return p


def _writable_dir(d: Path) -> bool:
    """True when a file can be created in the existing directory ``d`` (probed, not guessed)."""
    if not os.access(d, os.W_OK | os.X_OK):
        return False
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tilesim-probe-")
    except OSError:
        return False
    os.close(fd)
    os.unlink(tmp)
    return True


def check_output_path(path, flag: str, kind: str = "file") -> Path:
    """Check that ``path`` can be written as a ``kind`` ("file" or "dir") before any work starts.

    A missing path is fine when its nearest existing ancestor is a writable directory (the
    folders are created later); an existing path must be of the right kind and writable.

    Raises
    ------
    ConfigError
        One line naming ``flag``, the path, what is wrong with it and the fix: a directory where
        a file is expected (or the reverse), a path under a regular file, a read-only folder.
    """
    if kind not in ("file", "dir"):
        raise ConfigError(config_message("kind", kind, "must be 'file' or 'dir'", "pass kind='file' or kind='dir'"))
    text = str(path)
    if not text or "\0" in text:
        raise ConfigError(config_message(flag, text, "is not a usable path", "give a file or folder name"))
    p = Path(path).expanduser()
    try:
        if p.exists():
            if kind == "file" and p.is_dir():
                raise ConfigError(
                    config_message(
                        flag,
                        text,
                        "is a directory, a file is expected",
                        "give the path of a file (inside it or elsewhere)",
                    )
                )
            if kind == "dir" and not p.is_dir():
                raise ConfigError(
                    config_message(
                        flag, text, "is an existing file, a folder is expected", "give a new or existing folder name"
                    )
                )
            if kind == "dir":
                if not _writable_dir(p):
                    raise ConfigError(
                        config_message(flag, text, "is a read-only folder", "give a folder you can write to")
                    )
            elif not os.access(p, os.W_OK) or not _writable_dir(p.parent):
                raise ConfigError(
                    config_message(flag, text, "is read-only (or its folder is)", "give a path you can write to")
                )
            return p
        anc = _nearest_existing(p.parent if p.parent != p else p)
        if not anc.is_dir():
            raise ConfigError(
                config_message(
                    flag,
                    text,
                    f"lies under {str(anc)!r}, which is a file, not a folder",
                    "give a path whose parents are folders",
                )
            )
        if not _writable_dir(anc):
            raise ConfigError(
                config_message(
                    flag,
                    text,
                    f"cannot be created: {str(anc)!r} is read-only",
                    "give a path under a folder you can write to",
                )
            )
    except OSError as exc:  # e.g. a name too long for the file system
        raise ConfigError(
            config_message(flag, text, f"is not usable ({exc.strerror or exc})", "give a shorter or simpler path")
        ) from None
    return p
