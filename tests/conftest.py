"""Fixtures shared by every test area; the helpers they build on are in tests/helpers.py.

The app over HTTP (`app`, `client`, `make_client`, `signed_in_client`, `instructor_client`): create_app(settings)
on a migrated SQLite file, TestClients with the lifespan running and their CSRF header set. A test module marked
`small_course` gets an app serving two small lessons of its own (alpha, beta) instead of the course's content.
Module-scoped apps: `site_client` (the real lessons), `fixture_client` (tests/fixtures/good), `live_app` (the
real exercises and sandbox; `learner` is a fresh browser on it). A real server and browser: `live_server`,
`live_site`, `chromium`, `browser_page`. A warm sandbox: `sandbox` (a BlockingRunner) and `sandbox_settings`.
A mail server: `smtp_sink`.
Databases: `db_backend` ("sqlite", or both "sqlite" and "postgresql" in modules marked `both_databases`),
`postgres_server` and `postgres_template` (one real PostgreSQL per session). The worker tier: `redis_server` (per
test), `tier_redis` and `running_tier` (per module: two `course serve` and two `course worker` processes).
"""

from __future__ import annotations

import os
import uuid

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.runner import BlockingRunner
from tests.helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    FIXTURES,
    TEST_PASSWORD,
    Browsers,
    LiveServer,
    SmtpSink,
    create_account,
    make_settings,
    migrate_database,
    small_course,
    with_csrf,
)

# Each pytest-xdist process (`make test` runs two) gives its sandbox jobs uids of their own, as any two sandbox
# servers on one host must (docs/configuration.md, COURSE_SANDBOX_UID_BASE): jobs have no user namespace, so
# RLIMIT_NPROC counts a uid's processes across the host, and one process's fork bomb would count against the
# other's jobs. Set before any Settings is made; the servers the tests start inherit it.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST_WORKER.startswith("gw"):
    os.environ.setdefault("COURSE_SANDBOX_UID_BASE",
                          str(Settings.model_fields["sandbox_uid_base"].default + 1000 * int(_XDIST_WORKER[2:])))

# --- settings and the app over HTTP -----------------------------------------------------------------------------


def pytest_generate_tests(metafunc):
    """Run each test of a module marked `both_databases` against SQLite and against PostgreSQL."""
    if metafunc.definition.get_closest_marker("both_databases") and "db_backend" in metafunc.fixturenames:
        metafunc.parametrize("db_backend", ["sqlite", "postgresql"], indirect=True, scope="module")


def pytest_collection_modifyitems(items):
    """Give each schemathesis case its own node id: schemathesis names an item after its operation
    (`test_api...[GET /healthz]`) but leaves every item the test function's node id, and pytest-xdist, which hands
    items to its processes by node id, would then run one of the 42 and drop the rest without a word."""
    for item in items:
        if getattr(item, "operation_label", None) and not item.nodeid.endswith("]"):
            item._id = type(item._id).parse(f"{item.parent.nodeid}::{item.name}")  # pytest's NodeId


@pytest.fixture(scope="module")
def db_backend(request) -> str:
    """The database a test's app uses: "sqlite", or "postgresql" too in modules marked `both_databases`."""
    return getattr(request, "param", "sqlite")


def database_override(request, db_backend: str) -> dict:
    """Return the settings override for the backend: nothing for SQLite, a fresh migrated PostgreSQL database."""
    if db_backend != "postgresql":
        return {}
    server = request.getfixturevalue("postgres_server")
    template = request.getfixturevalue("postgres_template")
    return {"database_url": server.create_database(f"t_{uuid.uuid4().hex[:12]}", template=template)}


@pytest.fixture
def settings(request, tmp_path, db_backend) -> Settings:
    """Settings for one test: a real SQLite file in a temp dir (or a PostgreSQL database, see `db_backend`),
    test mode (two small lessons if `small_course`)."""
    marked = request.node.get_closest_marker("small_course") is not None
    return make_settings(tmp_path, course=small_course(tmp_path) if marked else None,
                         **database_override(request, db_backend))


@pytest.fixture
def app(settings):
    """The real application on a fresh SQLite file migrated to head."""
    from app.main import create_app

    migrate_database(settings.database_url)
    application = create_app(settings)
    yield application
    application.state.db.dispose()


@pytest.fixture
def client(app):
    """A browser on the running app (lifespan started), with its CSRF header set."""
    with TestClient(app) as test_client:
        yield with_csrf(test_client)


@pytest.fixture
def make_client(app, client):
    """Build more browsers on the same running app: `make_client(csrf=True)` -> TestClient (own cookies)."""
    return Browsers(app, client.portal, "10.0.0").new


@pytest.fixture
def signed_in_client(app, make_client):
    """Sign in a new browser: `signed_in_client("ann@example.org", name="Ann", role="learner")`; `.user` holds
    GET /api/me's user. The account is created straight in the database."""
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


# --- apps shared by a module ------------------------------------------------------------------------------------


def _module_app(tmp, course=None, **extra):
    from app.main import create_app

    return create_app(make_settings(tmp, course=course, migrate=True, **extra))


@pytest.fixture(scope="module")
def live_app(request, tmp_path_factory, db_backend):
    """The real app with its runner started (the course's own lessons and exercises); `.browsers.new()` gives a
    fresh learner."""
    app = _module_app(tmp_path_factory.mktemp("live"), **database_override(request, db_backend))
    with TestClient(app) as first:
        app.browsers = Browsers(app, first.portal, "10.1.0")
        yield app
    app.state.db.dispose()


@pytest.fixture(scope="module")
def site_client(tmp_path_factory) -> TestClient:
    """A client of the real app serving the real lessons/ and exercises/."""
    app = _module_app(tmp_path_factory.mktemp("real"))
    with TestClient(app) as c:
        yield c
    app.state.db.dispose()


@pytest.fixture(scope="module")
def fixture_client(tmp_path_factory) -> TestClient:
    """A client of the real app serving tests/fixtures/good (two lessons, one exercise)."""
    app = _module_app(tmp_path_factory.mktemp("good"), FIXTURES / "good")
    with TestClient(app) as c:
        yield c
    app.state.db.dispose()


@pytest.fixture
def learner(live_app) -> TestClient:
    """A fresh anonymous learner on the shared live app."""
    return live_app.browsers.new()


@pytest.fixture
def html_headers() -> dict[str, str]:
    return {"accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def make_site_settings():
    """Return `make_settings(tmp, course)` migrated, for tests that build their own app."""
    return lambda tmp, course=None, **extra: make_settings(tmp, course=course, migrate=True, **extra)


@pytest.fixture
def fixtures_dir():
    return FIXTURES


# --- a real server and a real browser ---------------------------------------------------------------------------


@pytest.fixture
def live_server(settings):
    """Serve the real app over HTTP on 127.0.0.1 for one test; yield its base URL."""
    from app.main import create_app

    migrate_database(settings.database_url)
    application = create_app(settings)
    with LiveServer(application) as server:
        yield server.url
    application.state.db.dispose()


@pytest.fixture(scope="module")
def live_site(tmp_path_factory):
    """The real site served by uvicorn on 127.0.0.1 (real SQLite file, real sandbox), shared by a module:
    `live_server` starts one per test, and each start pays for the sandbox's fork server."""
    app = _module_app(tmp_path_factory.mktemp("live-site"))
    with LiveServer(app) as server:
        yield server
    app.state.db.dispose()


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


@pytest.fixture
def smtp_sink():
    """A local SMTP server keeping what it receives (`.messages`); its address is `.url`."""
    with SmtpSink() as sink:
        yield sink


# --- a warm sandbox ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sandbox_settings(tmp_path_factory) -> Settings:
    """Test settings for sandbox and runner tests: one pre-forked child."""
    return make_settings(tmp_path_factory.mktemp("sandbox"), sandbox_prefork=1)


@pytest.fixture(scope="session")
def sandbox(sandbox_settings):
    """A started runner (real fork server, real isolation) behind a blocking facade, shared by the session."""
    with BlockingRunner(sandbox_settings) as runner:
        yield runner


# --- the worker tier's servers ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server (Debian's), started once per session as an unprivileged user in a temp dir."""
    from tests.support.services import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_template(postgres_server) -> str:
    """The name of a database migrated to head; tests copy it (CREATE DATABASE ... TEMPLATE) in milliseconds."""
    from app.core.db import upgrade

    upgrade(postgres_server.create_database("course_template"))
    return "course_template"


@pytest.fixture
def redis_server():
    """A real Redis server (Debian's redis-server) on a free port, for one test; see `tier_redis` for a module."""
    from tests.support.services import RedisServer

    with RedisServer() as server:
        yield server


# seconds; short, so a dead worker's job is re-queued within a few seconds of its last heartbeat
TEST_LEASE_S = "3"


@pytest.fixture(scope="module")
def tier_redis():
    from tests.support.services import RedisServer

    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def running_tier(tier_redis, postgres_server, postgres_template, tmp_path_factory):
    """Two web servers and two workers (one job slot each) on one Redis and one PostgreSQL database."""
    from tests.support.tier import tier

    url = postgres_server.create_database(f"tier_{uuid.uuid4().hex[:8]}", template=postgres_template)
    with tier(url, tier_redis.url, tmp_path_factory.mktemp("tier-logs"), webs=2, workers=2,
              COURSE_RUNNER_LEASE_S=TEST_LEASE_S) as running:
        yield running
