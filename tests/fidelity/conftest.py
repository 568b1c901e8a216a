"""One warm sandbox runner for the whole corpus (starting a fork server takes seconds)."""

from __future__ import annotations

import pytest

from app.core.config import Settings
from app.runner import BlockingRunner


@pytest.fixture(scope="session")
def fidelity_runner(tmp_path_factory):
    """A LocalRunner (real fork server, real isolation) that runs the corpus's programs."""
    settings = Settings(env="test", secret_key="test-secret",
                        database_url=f"sqlite:///{tmp_path_factory.mktemp('fidelity') / 'course.db'}")
    with BlockingRunner(settings) as runner:
        yield runner
