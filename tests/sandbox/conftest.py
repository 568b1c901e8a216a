"""A warm sandbox shared by the sandbox tests (starting one costs seconds: torch is imported once)."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.runner import BlockingRunner


@pytest.fixture(scope="session")
def sandbox_settings(tmp_path_factory) -> Settings:
    """Test settings for sandbox tests."""
    db = tmp_path_factory.mktemp("sandbox") / "course.db"
    return Settings(env="test", secret_key="test-secret", database_url=f"sqlite:///{db}", sandbox_prefork=1)


@pytest.fixture(scope="session")
def sandbox(sandbox_settings):
    """A started LocalRunner behind a blocking facade."""
    with BlockingRunner(sandbox_settings) as runner:
        yield runner
