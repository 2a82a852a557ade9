"""Issue 19: the results store refuses other programs' databases untouched, reports damaged ones in
one line, and leases points so two sweeps never compute the same one."""

import sqlite3
import subprocess
import sys
import time

import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.running.store import APPLICATION_ID, ResultStore, lease_expired, lease_owner

KW = dict(swept={"a": 1}, config={"a": 1}, version="v")


def test_another_programs_database_is_refused_untouched(tmp_path):
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE users (name TEXT)")
        c.execute("INSERT INTO users VALUES ('ada')")
    before = db.read_bytes()
    with pytest.raises(ConfigError, match=r"is not a tilesim results store \(it has the table\(s\) users\); give"):
        ResultStore(db)
    assert db.read_bytes() == before and not (tmp_path / "app.db-wal").exists()
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ["users"]


def test_other_application_id_is_refused(tmp_path):
    db = tmp_path / "x.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA application_id = 1234")
    with pytest.raises(ConfigError, match="belongs to another program"):
        ResultStore(db)


def test_store_is_marked_and_reopened(tmp_path):
    db = tmp_path / "r.db"
    ResultStore(db).close()
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    ResultStore(db).close()
    ResultStore(db, create=False).close()


def test_missing_column_is_one_line_for_results(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.put("p1", status="ok", summary={"x": 1.0}, **KW)
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE points DROP COLUMN wall_s")
    assert main(["results", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "without the column(s) wall_s" in err and "give" in err


def test_damaged_row_is_one_line(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.put("p1", status="ok", summary={"x": 1.0}, **KW)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE points SET summary = '[1, 2]'")
    assert main(["results", str(db)]) == 2
    assert "is not a JSON object (damaged row)" in capsys.readouterr().err


def test_two_owners_never_claim_one_point(tmp_path):
    db = tmp_path / "r.db"
    a, b = lease_owner(), lease_owner()
    with ResultStore(db) as s1, ResultStore(db) as s2:
        assert s1.claim(["p1", "p2"], a) == ["p1", "p2"]
        assert s2.claim(["p1", "p2", "p3"], b) == ["p3"]
        s1.put("p1", status="ok", summary={}, **KW)  # storing drops the lease
        assert s2.claim(["p1"], b) == []  # ok points are never claimed
        s1.put("p2", status="failed", error="boom", **KW)
        assert s2.claim(["p2"], b) == ["p2"]  # a failed point is free again
        s1.release(a)


def test_expired_and_dead_owner_leases_are_reclaimed(tmp_path):
    db = tmp_path / "r.db"
    now = time.time()
    assert lease_expired("elsewhere:1:x", now - 1000, now, lease_s=600)
    assert not lease_expired("elsewhere:1:x", now - 10, now, lease_s=600)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    owner = f"{socket.gethostname()}:{dead.pid}:dead"
    assert lease_expired(owner, now, now) and not lease_expired(lease_owner(), now, now)
    with ResultStore(db) as s:
        assert s.claim(["p1"], owner) == ["p1"]
        assert s.claim(["p1"], lease_owner()) == ["p1"]  # its owner is gone
        live = lease_owner()
        assert s.claim(["p2"], live, lease_s=0.05) == ["p2"]
        time.sleep(0.1)
        assert s.claim(["p2"], lease_owner(), lease_s=0.05) == ["p2"]  # not renewed in time


def test_path_checks_for_db_and_exports(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    sweep = tmp_path / "s.toml"
    sweep.write_text("[base]\nsteps = 1\n")
    cases = [
        (["sweep", str(sweep), "--db", str(tmp_path / "dir")], "is a directory, a file is expected"),
        (["sweep", str(sweep), "--db", str(tmp_path / "file" / "r.db")], "which is a file, not a folder"),
        (["results", str(tmp_path / "missing.db"), "--csv", str(tmp_path / "dir")], "--csv = "),
        (["results", str(tmp_path / "missing.db"), "--parquet", str(tmp_path / "file" / "x")], "--parquet = "),
    ]
    for argv, needle in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err
