"""Fixtures for the live-exercise tests: the real app (real SQLite file, real sandbox runner, the course's own
lessons and exercises) shared by a module, over TestClient and over a real uvicorn server for the browser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]


def live_settings(tmp: Path, **extra) -> Settings:
    """Settings on a fresh, migrated SQLite file in tmp; the real lessons/ and exercises/."""
    from app.db import upgrade

    settings = Settings(env="test", database_url=f"sqlite:///{tmp / 'course.db'}", secret_key="test-secret", **extra)
    upgrade(settings.database_url)
    return settings


class Browsers:
    """TestClients on one running app, each its own learner (own cookies, own client address)."""

    def __init__(self, app, first: TestClient) -> None:
        self.app = app
        self.first = first
        self.count = 1

    def new(self) -> TestClient:
        """Return a new anonymous browser with its CSRF header set."""
        self.count += 1
        browser = TestClient(self.app, client=(f"10.1.0.{self.count}", 50000))
        browser.portal = self.first.portal  # the event loop where the app's lifespan (and runner) started
        browser.headers["X-CSRF-Token"] = browser.get("/api/auth/csrf").json()["csrf_token"]
        return browser


@pytest.fixture(scope="module")
def live_app(tmp_path_factory):
    """The real app with its runner started; `.browsers.new()` gives a fresh learner."""
    app = create_app(live_settings(tmp_path_factory.mktemp("live")))
    with TestClient(app) as first:
        app.browsers = Browsers(app, first)
        yield app
    app.state.db.dispose()


@pytest.fixture
def learner(live_app) -> TestClient:
    """A fresh anonymous learner on the shared app."""
    return live_app.browsers.new()


def parse_sse(text: str) -> list[tuple[str, dict]]:
    """Parse an event stream into (event, data) pairs; keep-alive comments are skipped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.fixture(scope="module")
def live_site(tmp_path_factory):
    """The real site served by uvicorn on 127.0.0.1 (real SQLite file, real sandbox), shared by a module:
    the root conftest's `live_server` starts one per test, and each start pays for the sandbox's fork server."""
    app = create_app(live_settings(tmp_path_factory.mktemp("live-site")))
    with LiveServer(app) as server:
        yield server
    app.state.db.dispose()
