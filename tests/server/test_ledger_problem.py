"""``problem()`` of both jti ledgers: None while a claim would work, a reason (no path, no
secret) once it would not, which the planes' health then reports (``Plane.ledger_problem``)."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

from ratatoskr.postgres.jti import PgJtiLedger
from ratatoskr.sqlite.jti import JtiLedger
from tests.backends import postgres_schema


def test_the_sqlite_ledger_says_when_its_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "memory.jti.db"
    ledger = JtiLedger(str(path))
    try:
        assert ledger.problem() is None
        os.rename(path, tmp_path / "away.db")
        assert ledger.problem() == "database file is missing"
        os.rename(tmp_path / "away.db", path)
        assert ledger.problem() is None
    finally:
        ledger.close()


def test_the_postgres_ledger_says_when_its_table_is_dropped() -> None:
    url = postgres_schema("ledger-problem")
    ledger = PgJtiLedger(url)
    try:
        assert ledger.problem() is None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE ratatoskr_jti")
        problem = ledger.problem()
        assert problem is not None and "lacks what this build needs" in problem, problem
        assert "@" not in problem and "postgresql:" not in problem
    finally:
        ledger.close()
