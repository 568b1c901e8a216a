"""`course serve`: refuses broken content in production, shows it as a page with --reload, reloads on change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from app import ROOT
from app.content.schema import ContentInvalid
from app.core.config import get_settings
from app.main import create_app

COURSE = str(Path(sys.executable).parent / "course")


def test_production_app_refuses_broken_content(tmp_path, fixtures_dir, make_site_settings):
    settings = make_site_settings(tmp_path, fixtures_dir / "broken")
    production = settings.model_copy(update={"env": "production"})
    with pytest.raises(ContentInvalid) as info:
        create_app(production)
    assert any("a-schema.md:4:" in str(e) for e in info.value.errors)


@pytest.mark.parametrize("env", ["production", "development"])
def test_serve_command_refuses_broken_content_with_check_messages(fixtures_dir, env):
    broken = fixtures_dir / "broken"
    result = subprocess.run([COURSE, "serve", "--port", "1"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COURSE_ENV": env, "COURSE_SECRET_KEY": "s" * 40,
                                 "COURSE_LESSONS_DIR": str(broken / "lessons"),
                                 "COURSE_EXERCISES_DIR": str(broken / "exercises")})
    assert result.returncode == 1
    assert "tests/fixtures/broken/lessons/a-schema.md:4: front matter: fix `order`" in result.stderr
    assert "refusing to start" in result.stderr


def test_serve_passes_host_port_and_graceful_shutdown_to_uvicorn(monkeypatch, tmp_path, fixtures_dir,
                                                                 make_site_settings):
    import uvicorn

    settings = make_site_settings(tmp_path, fixtures_dir / "good")
    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    monkeypatch.setenv("COURSE_ENV", "test")
    monkeypatch.setenv("COURSE_SECRET_KEY", "test-secret")
    monkeypatch.setenv("COURSE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("COURSE_LESSONS_DIR", str(settings.lessons_dir))
    monkeypatch.setenv("COURSE_EXERCISES_DIR", str(settings.exercises_dir))
    get_settings.cache_clear()
    try:
        from app.cli import main

        result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "8123"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    (app, kwargs), = calls
    assert kwargs["host"] == "0.0.0.0" and kwargs["port"] == 8123
    assert kwargs["timeout_graceful_shutdown"] > 0
    assert [x.slug for x in app.state.course.lessons] == ["first-steps", "second-steps"]


def _wait_for(client: TestClient, path: str, status: int, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while True:
        response = client.get(path)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_reload_shows_errors_as_a_page_then_picks_up_the_fix(tmp_path, fixtures_dir, make_site_settings):
    course = tmp_path / "course"
    shutil.copytree(fixtures_dir / "good", course)
    lesson = course / "lessons" / "second.md"
    good_text = lesson.read_text()
    lesson.write_text(good_text.replace("order: 2", "order: second"))
    settings = make_site_settings(tmp_path, course)
    app = create_app(settings, watch_content=True)
    with TestClient(app) as client:
        page = client.get("/")
        assert page.status_code == 500
        assert "second.md:4: front matter: fix `order`" in page.text
        lesson.write_text(good_text + "\n## Added later\n")  # fixed, and a new section
        page = _wait_for(client, "/lessons/second-steps", 200)
        assert page.status_code == 200, page.text
        assert 'id="added-later"' in page.text
    app.state.db.dispose()
