"""Fixtures shared by every test area. Area-specific fixtures live in the area's own conftest.py."""

from __future__ import annotations

import pytest

from app.config import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings for one test: a real SQLite file in a temp dir, test mode."""
    return Settings(env="test", database_url=f"sqlite:///{tmp_path / 'course.db'}", secret_key="test-secret")


# --- the app over HTTP, with accounts (H-accounts) ------------------------------------------------------------
# `app`: create_app(settings) on a migrated SQLite file. `client`: a TestClient with the app's lifespan running and
# this browser's CSRF token already in its X-CSRF-Token header (what the pages' scripts send). `make_client()`:
# another browser (own cookies) on the same running app. `signed_in_client(email, name=..., role=...)`: a new
# browser signed in as a fresh account (created directly in the database); `.user` holds GET /api/me's user.
# `instructor_client`: the same for an instructor. Each extra browser gets its own client address, so the
# per-address log-in limit does not trip in tests that sign in many people.

TEST_PASSWORD = "correct horse battery staple"


@pytest.fixture
def app(settings):
    """The real application on a fresh SQLite file migrated to head."""
    from app.db import upgrade
    from app.main import create_app

    upgrade(settings.database_url)
    application = create_app(settings)
    yield application
    application.state.db.dispose()


def _with_csrf(test_client):
    token = test_client.get("/api/auth/csrf").json()["csrf_token"]
    test_client.headers["X-CSRF-Token"] = token
    return test_client


@pytest.fixture
def client(app):
    """A browser on the running app (lifespan started), with its CSRF header set."""
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield _with_csrf(test_client)


@pytest.fixture
def make_client(app, client):
    """Build more browsers on the same running app: `make_client(csrf=True)` -> TestClient (own cookies)."""
    from fastapi.testclient import TestClient

    count = iter(range(2, 250))

    def make(csrf: bool = True):
        other = TestClient(app, client=(f"10.0.0.{next(count)}", 50000))
        other.portal = client.portal  # run in the event loop where the app's lifespan started
        return _with_csrf(other) if csrf else other

    return make


def create_account(app, email: str, *, name: str = "Test Learner", role: str = "learner", password=TEST_PASSWORD):
    """Create an account straight in the database (no rate limit, no HTTP) and return its id."""
    from app import accounts

    with app.state.db.session(write=True) as session:
        user = accounts.create_user(session, email=email, password=password, display_name=name, role=role)
        session.commit()
        return user.id


@pytest.fixture
def signed_in_client(app, make_client):
    """Sign in a new browser: `signed_in_client("ann@example.org", name="Ann", role="learner")`."""
    emails = iter(f"learner{i}@example.org" for i in range(1, 1000))

    def sign_in(email: str | None = None, *, name: str = "Test Learner", role: str = "learner"):
        email = email or next(emails)
        create_account(app, email, name=name, role=role)
        browser = make_client()
        response = browser.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
        assert response.status_code == 200, response.text
        browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
        browser.user = response.json()["user"]
        return browser

    return sign_in


@pytest.fixture
def instructor_client(signed_in_client):
    """A browser signed in as an instructor."""
    return signed_in_client("instructor@example.org", name="Ines Instructor", role="instructor")


# --- a real server and a real browser (H-site) -------------------------------------------------------------------
# `live_server`: the real app (built from `settings`, database migrated) served by uvicorn in a thread on a free
# 127.0.0.1 port; yields the base URL. `LiveServer(app)` is the same as a context manager, for module-scoped
# fixtures. `browser_page`: a fresh Playwright page in Debian's Chromium (never `playwright install`); console
# errors and uncaught page errors are collected in `page.console_errors`. Screenshots go to `ARTIFACTS`.

import pathlib as _pathlib  # noqa: E402

ARTIFACTS = _pathlib.Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """A real uvicorn server for one app, in a thread, on a free port; `.url` is its base URL."""

    def __init__(self, app) -> None:
        import threading

        import uvicorn

        self.app = app
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        import time

        self.thread.start()
        deadline = time.monotonic() + 60  # seconds; the runner's fork server imports torch before start-up ends
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the live server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def live_server(settings):
    """Serve the real app over HTTP on 127.0.0.1 for one test; yield its base URL."""
    from app.db import upgrade
    from app.main import create_app

    upgrade(settings.database_url)
    application = create_app(settings)
    with LiveServer(application) as server:
        yield server.url
    application.state.db.dispose()


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium driven by Playwright, shared by one test module.

    Not by the whole session: Playwright's sync API keeps an asyncio loop running in the main thread while it is
    open, and every later test that calls asyncio.run() (load tests, `course grade`) would then fail.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium):
    """A fresh page (own cookies) at desktop size; `page.console_errors` lists console and page errors."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda msg: msg.type == "error" and page.console_errors.append(msg.text))
    page.on("pageerror", lambda err: page.console_errors.append(str(err)))
    yield page
    context.close()
