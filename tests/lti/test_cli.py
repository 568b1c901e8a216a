"""`course lti add-platform`, `platforms` and `rotate-key` on a real SQLite file."""

from __future__ import annotations

from click.testing import CliRunner

from app.cli import main
from app.core.config import get_settings
from tests.helpers import SECRET, make_settings


def test_add_platform_twice_updates_it_and_rotate_key_makes_a_new_one(tmp_path, monkeypatch):
    settings = make_settings(tmp_path, migrate=True, public_url="https://course.example.org")
    for name, value in {"COURSE_ENV": "test", "COURSE_SECRET_KEY": SECRET, "COURSE_DATABASE_URL": settings.database_url,
                        "COURSE_PUBLIC_URL": settings.public_url}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        cli = CliRunner()
        args = ["lti", "add-platform", "canvas", "--issuer", "https://canvas.instructure.com", "--client-id",
                "10000000000001", "--auth-login-url", "https://sso.canvaslms.com/api/lti/authorize_redirect",
                "--auth-token-url", "https://sso.canvaslms.com/login/oauth2/token", "--jwks-url",
                "https://sso.canvaslms.com/api/lti/security/jwks", "--deployment", "1:abc"]
        first = cli.invoke(main, args)
        assert first.exit_code == 0, first.output
        assert "https://course.example.org/lti/login" in first.output
        assert "https://course.example.org/lti/jwks" in first.output
        again = cli.invoke(main, [*args[:-1], "2:def"])
        assert "deployments: 1:abc, 2:def" in again.output
        listed = cli.invoke(main, ["lti", "platforms"])
        assert listed.output.count("canvas:") == 1
        rotated = cli.invoke(main, ["lti", "rotate-key"])
        assert rotated.exit_code == 0 and "now signs with key" in rotated.output
        sent = cli.invoke(main, ["lti", "send"])
        assert sent.exit_code == 0 and sent.output.strip() == "sent 0, failed 0, waiting 0"
    finally:
        get_settings.cache_clear()
