"""Crash-safe file output: write to a temporary file beside the target, then rename."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as ``tomli`` before it joined the standard library
    import tomli as tomllib

from tilesim.errors import ConfigError, config_message


def loads_toml(text: str) -> dict:
    """Parse TOML text (``tomllib`` on Python 3.11+, ``tomli`` on 3.10); raises ``TOMLDecodeError``."""
    return tomllib.loads(text)


def _kind_of(mode: int) -> str:
    """What a non-regular file is, in a user's words."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path, what: str, fix: str = "give a regular file", max_bytes: float | None = None) -> Path:
    """``path`` if it names a regular file (after symlinks) of at most ``max_bytes``; else a
    :class:`ConfigError` naming ``what``. Checked before the file is opened: reading a FIFO blocks
    forever, a device such as ``/dev/zero`` never ends, a folder cannot be read as a file."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        problem = "no such file" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror})"
        raise ConfigError(config_message(what, str(path), problem, fix)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(config_message(what, str(path), f"is {_kind_of(st.st_mode)}, not a regular file", fix))
    if max_bytes is not None and st.st_size > max_bytes:
        raise ConfigError(
            config_message(what, str(path), f"is {st.st_size:,} B, more than the {max_bytes:,.0f} B this reads", fix)
        )
    return p


#: the largest TOML or CSV file read: a program of a whole wafer's per-tile arrays is a few MB, a
#: cases file a few KB; the parsed form takes ~20x the text (Python objects), ~1.3 GB at this size
MAX_TEXT_BYTES = 64e6


def read_text(path, what: str, fix: str = "check the path") -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`regular_file`, at most :data:`MAX_TEXT_BYTES`);
    a file that is not UTF-8 text is a :class:`ConfigError` naming ``what`` and the first bad byte."""
    p = regular_file(path, what, fix, MAX_TEXT_BYTES)
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            config_message(
                what,
                str(path),
                f"is not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at offset {exc.start:,})",
                "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
            )
        ) from None
    except OSError as exc:
        raise ConfigError(config_message(what, str(path), f"cannot be read ({exc.strerror})", fix)) from None


def read_toml(path, what: str) -> dict:
    """Parse a TOML file; a missing file, a special file (FIFO, device, folder), a file over
    :data:`MAX_TEXT_BYTES` or broken syntax is a :class:`ConfigError` naming ``what``."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            config_message(what, str(path), f"is not valid TOML ({exc})", "fix the syntax at the position given")
        ) from None
    except RecursionError:
        raise ConfigError(
            config_message(
                what, str(path), "nests arrays or tables too deeply to read", "write at most a few levels of nesting"
            )
        ) from None


def _non_finite(obj, where: str) -> tuple[str, float] | None:
    """The key path and value of the first NaN or infinity in ``obj`` (dicts, lists, tuples, floats)."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where, obj)
    if isinstance(obj, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for w, v in items:
        found = _non_finite(v, w)
        if found:
            return found
    return None


def dumps_json(obj, **kwargs) -> str:
    """``json.dumps(obj, **kwargs)`` as standard JSON: a NaN or infinity (which ``json`` would write
    as the non-standard ``NaN`` / ``Infinity``) is a :class:`ConfigError` naming its key path. Every
    JSON tilesim prints or writes goes through here; the inputs are checked for finite, sensible
    values when they are read, so this refusal means a result left the float range regardless."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as exc:
        found = _non_finite(obj, "")
        if found is None:
            raise
        raise ConfigError(
            config_message(
                found[0] or "output",
                found[1],
                "is not a finite number, and JSON has none",
                "check the machine, cost and cases files it comes from (their numbers must be in physical ranges)",
            )
        ) from exc


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` so that a reader never sees a half-written file."""
    return atomic_write_bytes(path, text.encode())


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and a rename (nothing half-written). A symbolic
    link is written through: the file it names is replaced, the link stays."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk says nothing of the file: name it
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
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


# ---- folders written whole: staged beside the target, swapped in when complete ----------------
STAGING = ".staging-"  # prefix of a folder being written beside its target (never a run)
RETIRED = ".retired-"  # prefix of a replaced folder on its way out (restored if the swap was cut short)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # only here: the swap's one system call (start-up time)

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def recover_folder(target) -> None:
    """Undo a swap cut short by a kill: when ``target`` is missing but a retired copy of it lies
    beside it, put that copy back; staging folders of killed writes are removed."""
    target = Path(target)
    parent = target.parent
    if not parent.is_dir():
        return
    retired = sorted(parent.glob(f".{target.name}{RETIRED}*"), key=lambda p: p.stat().st_mtime)
    if retired and not target.exists():
        os.rename(retired.pop(), target)
    for p in retired + list(parent.glob(f".{target.name}{STAGING}*")):
        shutil.rmtree(p, ignore_errors=True)


def _swap_in(stage: Path, target: Path, drop: frozenset = frozenset()) -> None:
    """Make ``stage`` the folder at ``target``. The old folder's files that the new one does not
    have (the user's own notes, say) move into the new one, but for those named in ``drop`` (what the
    old run wrote); then the old folder is removed."""
    if not target.exists():
        os.rename(stage, target)
        return
    if _renameat2_exchange(stage, target):  # one step: target is the old run, then the new one
        old = stage
    else:  # two steps; a kill between them leaves the old run retired beside it (recover_folder)
        old = target.parent / f".{target.name}{RETIRED}{stage.name.rsplit('-', 1)[-1]}"
        os.rename(target, old)
        os.rename(stage, target)
    for p in old.iterdir():
        if p.name not in drop and not (target / p.name).exists():
            os.rename(p, target / p.name)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_folder(target, drop: frozenset = frozenset()):
    """``with staged_folder(out) as stage:`` write every file into ``stage``, a fresh folder beside
    ``out``; when the block ends without an error the stage becomes ``out`` in one swap, so a kill
    at any moment leaves the old folder or the new one, never neither and never a mix. On an error
    the stage is removed and ``out`` is untouched. The old folder's other files are kept, but for
    those named in ``drop`` (the old run's own outputs)."""
    target = Path(target).expanduser()
    if target.is_symlink():  # write where it points: the link stays, the folder it names is the one replaced
        target = target.resolve()  # (swapping the link itself moved that folder's files into a new one)
    target = target.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    recover_folder(target)
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}{STAGING}"))
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    os.chmod(stage, 0o755)
    _swap_in(stage, target, frozenset(drop))


def json_keys(path: Path) -> set:
    """The top-level keys of JSON file ``path`` (empty when it is not a JSON object or cannot be read)."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return set()
    return set(d) if isinstance(d, dict) else set()


def check_own_outputs(path, flag: str, command: str, outputs: dict, force: bool = False) -> Path:
    """:func:`check_output_path` for a folder that ``command`` writes the files or folders named in
    ``outputs`` into, and: unless ``force``, an existing one of them that ``command`` did not write
    (``outputs[name](path / name)`` is False) is refused, so a user's file of the same name is never
    replaced. Returns the path; raises :class:`ConfigError` (one line)."""
    p = check_output_path(path, flag, "dir")
    if force or not p.is_dir():
        return p
    theirs = [n for n, ours in outputs.items() if (p / n).exists() and not ours(p / n)]
    if theirs:
        raise ConfigError(
            config_message(
                flag,
                str(path),
                f"holds {', '.join(theirs)} that tilesim {command} did not write",
                "give a new or empty folder, or add --force to replace them",
            )
        )
    return p


def is_run_folder(path: Path) -> bool:
    """True when ``path`` is a folder holding a tilesim run (:data:`RUN_MARKERS`)."""
    return Path(path).is_dir() and any((Path(path) / m).exists() for m in RUN_MARKERS)


RUN_MARKERS = ("manifest.json", "summary.json")
"""Files that make a folder a tilesim run (summary.json alone: a run interrupted, or an older tilesim)."""


def check_run_folder(path, flag: str, force: bool = False) -> Path:
    """:func:`check_output_path` for a run folder, and: an existing folder that holds other files
    but no tilesim run is refused unless ``force`` (a run would replace its files of the same
    names; with ``force`` its other files are kept beside the run).

    Raises
    ------
    ConfigError
        One line naming ``flag``, the folder, what it holds and the fix.
    """
    p = check_output_path(path, flag, "dir")
    if force or not p.is_dir() or any((p / m).exists() for m in RUN_MARKERS):
        return p
    others = sorted(e.name for e in p.iterdir() if not e.name.startswith("."))
    if others:
        raise ConfigError(
            config_message(
                flag,
                str(path),
                f"is a folder of {len(others)} other file(s) (e.g. {others[0]!r}), not a tilesim run: a run would "
                "replace its files of the same names",
                "give a new or empty folder, or add --force to write into it (its other files are kept)",
            )
        )
    return p
