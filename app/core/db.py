"""The database: one engine and a session factory built from `settings.database_url`.

Text no column can hold (NUL, lone surrogates) is replaced in every statement's parameters and every JSON value
before it reaches the driver (app/core/storable.py), so a learner's bytes never make an insert fail.

SQLite is the single-machine default, so its connections get the pragmas a multi-threaded web server needs
(WAL, foreign keys, a busy timeout). Nothing here or in the models is SQLite-only: PostgreSQL works by URL.

Transactions on SQLite: the sqlite3 driver's own BEGIN handling is switched off and SQLAlchemy emits it.
Sessions that will write (`Database.session(write=True)`; the web layer uses it for POST/PATCH/DELETE) begin
with `BEGIN IMMEDIATE`, taking the write lock up front, so a writer waits in the busy timeout instead of failing
with "database is locked" when its read snapshot goes stale (SQLITE_BUSY_SNAPSHOT is never retried by SQLite).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.core.storable import storable_json, storable_params

# milliseconds a connection waits for another writer before giving up; commits take well under 10 ms
SQLITE_BUSY_TIMEOUT_MS = 15_000


def ensure_sqlite_dir(url: str) -> None:
    """Create the folder that holds a SQLite file (the default lives in `var/`, which git ignores)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def make_engine(url: str, *, foreign_keys: bool = True) -> Engine:
    """Create an engine; for SQLite, set the pragmas and take over BEGIN (see the module docstring).

    Migrations pass foreign_keys=False: batch mode rebuilds tables, and dropping the old copy with foreign
    keys on would cascade into child rows.
    """
    ensure_sqlite_dir(url)
    engine = create_engine(url, json_serializer=storable_json)
    event.listen(engine, "before_cursor_execute", _storable_statement, retval=True)
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine, foreign_keys=foreign_keys)
    return engine


def _storable_statement(_conn, _cursor, statement, parameters, _context, executemany):
    # every write of learner text passes here, whichever table and code path (app/core/storable.py says why)
    return statement, storable_params(parameters, executemany)


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the one writer
        cursor.execute("PRAGMA synchronous=NORMAL")  # safe with WAL; fsync at checkpoints, not every commit
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def alembic_config(url: str):
    """Return an Alembic Config for this project's migrations, aimed at `url`."""
    from alembic.config import Config

    from app import ROOT

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes["database_url"] = url
    config.attributes["configure_logger"] = False  # keep the caller's logging (pytest, click) as it is
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at `url` up to `revision`."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "-1") -> None:
    """Migrate the database at `url` down to `revision` ("-1": one step; "base": empty)."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def pending_migrations(url: str) -> bool:
    """Say whether the database at `url` is behind the newest migration (or has none applied)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
    return current != set(script.get_heads())


class Database:
    """An engine plus two session factories: read (plain BEGIN) and write (BEGIN IMMEDIATE on SQLite)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        writer = self.engine.execution_options(sqlite_immediate=True)
        self._write = sessionmaker(writer, expire_on_commit=False)

    def session(self, *, write: bool = False) -> Session:
        """Open a session; use `with db.session(write=True) as s, s.begin(): ...` for a unit of work."""
        return (self._write if write else self._read)()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


__all__ = [
    "Database",
    "alembic_config",
    "upgrade",
    "downgrade",
    "pending_migrations",
    "make_engine",
    "ensure_sqlite_dir",
    "SQLITE_BUSY_TIMEOUT_MS",
]
