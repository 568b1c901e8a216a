"""Alembic environment: the URL comes from the course settings, never from alembic.ini."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context

from app.core.db import make_engine
from app.models import Base, UTCDateTime

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def database_url() -> str:
    """Use the URL the caller passed (`course db`, tests), else COURSE_DATABASE_URL via Settings."""
    url = config.attributes.get("database_url")
    if url:
        return url
    from app.core.config import Settings

    return Settings().database_url


def render_item(type_, obj, autogen_context):
    """Render our UTC timestamp type as its portable implementation, so migrations don't import app code."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def compare_type(context, inspected_column, metadata_column, inspected_type, metadata_type):
    """Compare UTCDateTime by what it stores (a DateTime), so `alembic check` sees no drift."""
    if isinstance(metadata_type, UTCDateTime):
        return not isinstance(inspected_type, type(metadata_type.impl))
    return None


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=True,
        render_item=render_item,
        compare_type=compare_type,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # Foreign keys off while migrating: batch mode copies and drops tables, which must not cascade.
    engine = make_engine(database_url(), foreign_keys=False)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=True,  # SQLite cannot ALTER most things; batch mode rebuilds the table
                # app.core.db emits BEGIN itself on SQLite, so a failed migration rolls back whole there too
                transactional_ddl=True,
                render_item=render_item,
                compare_type=compare_type,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
