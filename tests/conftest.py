"""Fixtures shared by every test area. Area-specific fixtures live in the area's own conftest.py."""

from __future__ import annotations

import pytest

from app.config import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings for one test: a real SQLite file in a temp dir, test mode."""
    return Settings(env="test", database_url=f"sqlite:///{tmp_path / 'course.db'}", secret_key="test-secret")
