"""What several test areas share: settings for a test, more browsers on one running app, a real server, SSE.

Fixtures (conftest.py files) build on these; a test module that needs one directly imports it from here.
"""

from __future__ import annotations

import atexit
import json
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from fastapi.testclient import TestClient

from app.core.config import Settings

FIXTURES = Path(__file__).parent / "fixtures"
ARTIFACTS = Path(__file__).parent / "artifacts"  # screenshots; gitignored
CHROMIUM = "/usr/bin/chromium"  # Debian's; never `playwright install`
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
TEST_PASSWORD = "correct horse battery staple"
SECRET = "test-secret"

SMALL_LESSON = """---
title: {title}
slug: {slug}
order: {order}
summary: A lesson for the accounts tests.
estimated_minutes: 5
---

## Start

Some text about tensors and devices.
"""


def make_settings(tmp: Path, *, course: Path | None = None, migrate: bool = False, **extra) -> Settings:
    """Settings for tests: test mode, a SQLite file in tmp (migrated to head with migrate=True), the course's
    own lessons and exercises or those of `course` (a folder with lessons/ and exercises/); `extra` overrides."""
    folders = {} if course is None else {"lessons_dir": course / "lessons", "exercises_dir": course / "exercises"}
    settings = Settings(**{"env": "test", "secret_key": SECRET, "database_url": f"sqlite:///{tmp / 'course.db'}",
                           **folders, **extra})  # fmt: skip
    if migrate:
        migrate_database(settings.database_url)
    return settings


_HEAD: list[Path] = []  # a SQLite file migrated to head, made once per test process


def migrate_database(url: str) -> None:
    """Bring the database at `url` to head. A SQLite file not made yet is a copy of one file migrated once per
    session: the same bytes Alembic writes, in a millisecond instead of its 0.1-0.2 s per test (hundreds of tests
    start an app on a fresh file). Any other database (an existing file, PostgreSQL) is migrated as it is."""
    from app.core.db import upgrade

    path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    if path is None or path.exists():
        upgrade(url)
        return
    if not _HEAD:
        folder = Path(tempfile.mkdtemp(prefix="course-head-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        upgrade(f"sqlite:///{folder / 'head.db'}")
        with closing(sqlite3.connect(folder / "head.db")) as conn:  # the write-ahead log into the file itself
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _HEAD.append(folder / "head.db")
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_HEAD[0], path)


def side_by_side(*calls: Callable[[], object]) -> list:
    """Return each call's result, in order, running two at a time. For a test's independent `course run`s: each is
    mostly one interpreter importing torch on one core, so on two cores two of them take the time of one. Only for
    runs whose result does not depend on the machine's load (the simulated device's figures do not); an exception
    raises here, as the call alone would."""
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(call) for call in calls]
    return [future.result() for future in futures]


def small_course(tmp: Path) -> Path:
    """Write a course of two small lessons (alpha, beta) and no exercises under tmp; return its folder."""
    course = tmp / "small-course"
    (course / "lessons").mkdir(parents=True)
    (course / "exercises").mkdir()
    for order, (slug, title) in enumerate([("alpha", "Alpha lesson"), ("beta", "Beta lesson")], start=1):
        (course / "lessons" / f"{order:02d}-{slug}.md").write_text(SMALL_LESSON.format(title=title, slug=slug,
                                                                                       order=order))
    return course


class Browsers:
    """More browsers on one running app: each has its own cookies and its own client address (per-address rate
    limits do not trip in tests that sign many people in) and runs in the event loop of the app's lifespan."""

    def __init__(self, app, portal, network: str) -> None:
        self.app = app
        self.portal = portal
        self.network = network
        self.count = 1

    def new(self, csrf: bool = True) -> TestClient:
        """Return a new anonymous browser; with csrf, its X-CSRF-Token header is set (what the page scripts send)."""
        self.count += 1
        browser = TestClient(self.app, client=(f"{self.network}.{self.count}", 50000))
        browser.portal = self.portal  # the event loop where the app's lifespan (and its runner) started
        return with_csrf(browser) if csrf else browser


def with_csrf(browser: TestClient) -> TestClient:
    """Set the browser's X-CSRF-Token header to its session's token and return it."""
    browser.headers["X-CSRF-Token"] = browser.get("/api/auth/csrf").json()["csrf_token"]
    return browser


def create_account(app, email: str, *, name: str = "Test Learner", role: str = "learner", password=TEST_PASSWORD):
    """Create an account straight in the database (no rate limit, no HTTP) and return its id."""
    from app.accounts import users as accounts

    with app.state.db.session(write=True) as session:
        user = accounts.create_user(session, email=email, password=password, display_name=name, role=role)
        session.commit()
        return user.id


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """A real uvicorn server for one app, in a thread, on a free port; `.url` is its base URL."""

    def __init__(self, app) -> None:
        import uvicorn

        self.app = app
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
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


# axe's rules beyond its defaults that the site holds itself to: tap targets of at least 24 x 24 CSS px (WCAG 2.5.8)
AXE_OPTIONS = {"resultTypes": ["violations"], "rules": {"target-size": {"enabled": True}}}


def serious_violations(page) -> list[str]:
    """Run axe on a Playwright page (target-size included); return a line per serious or critical violation."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options=AXE_OPTIONS)
    return [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
            for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


def parse_sse(text: str, *, ids: bool = False) -> list[tuple]:
    """Parse an event stream into (event, data) pairs, or (id, event, data) with ids; keep-alives are skipped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
        if "event" in fields:
            event = (fields["event"], json.loads(fields["data"]))
            events.append((fields.get("id"), *event) if ids else event)
    return events


def output_lines(events: list[tuple[str, dict]], stream: str | None = None) -> list[str]:
    """The output lines an event stream carried, in order (`output` events hold batches of lines)."""
    return [item["line"] for kind, data in events if kind == "output" for item in data["lines"]
            if stream is None or item["stream"] == stream]



class SmtpSink:
    """A real SMTP server on 127.0.0.1 (aiosmtpd) that keeps every mail it receives; `.url` for COURSE_SMTP_URL."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list = []  # email.message.EmailMessage, in the order received
        self.port = _free_port()
        self.url = f"smtp://127.0.0.1:{self.port}"
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's handler hook
        import email
        from email import policy

        self.messages.append(email.message_from_bytes(envelope.content, policy=policy.default))
        return "250 Message accepted"

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()
