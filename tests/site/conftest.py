"""Fixtures for the site tests: the real app over the real lessons, and over small fixture courses."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app

FIXTURES = Path(__file__).parent / "fixtures"


def site_settings(tmp: Path, course: Path | None = None, **extra) -> Settings:
    """Test settings with a migrated SQLite file in tmp; `course` points lessons/exercises at a fixture course."""
    from app.db import upgrade

    folders = {} if course is None else {"lessons_dir": course / "lessons", "exercises_dir": course / "exercises"}
    settings = Settings(env="test", database_url=f"sqlite:///{tmp / 'course.db'}", secret_key="test-secret",
                        **folders, **extra)
    upgrade(settings.database_url)
    return settings


@pytest.fixture(scope="module")
def site_client(tmp_path_factory) -> TestClient:
    """A client of the real app serving the real lessons/ and exercises/."""
    app = create_app(site_settings(tmp_path_factory.mktemp("real")))
    with TestClient(app) as c:
        yield c
    app.state.db.dispose()


@pytest.fixture(scope="module")
def fixture_client(tmp_path_factory) -> TestClient:
    """A client of the real app serving tests/site/fixtures/good (two lessons, one exercise)."""
    app = create_app(site_settings(tmp_path_factory.mktemp("good"), FIXTURES / "good"))
    with TestClient(app) as c:
        yield c
    app.state.db.dispose()


@pytest.fixture
def html_headers() -> dict[str, str]:
    return {"accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def make_site_settings():
    """Return `site_settings` (tmp folder, optional fixture course) for tests that build their own app."""
    return site_settings


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
