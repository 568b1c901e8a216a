"""`course grade`, through the real sandbox."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from app.cli import main
from app.core.config import ROOT


def _env(tmp_path):
    return {"COURSE_ENV": "test", "COURSE_SECRET_KEY": "test-secret",
            "COURSE_DATABASE_URL": f"sqlite:///{tmp_path / 'course.db'}"}


@pytest.mark.slow  # three commands, each starting a sandbox
def test_course_grade_exit_codes_and_json(tmp_path):
    cli = CliRunner()
    ok = cli.invoke(main, ["grade", "same-device", str(ROOT / "exercises/same-device/solution.py")], env=_env(tmp_path))
    assert ok.exit_code == 0, ok.output
    assert "PASS same_device" in ok.output and "y =" in ok.output
    bad = cli.invoke(main, ["grade", "same-device", str(ROOT / "exercises/same-device/starter.py"), "--json"],
                     env=_env(tmp_path))
    assert bad.exit_code == 1
    verdict = json.loads(bad.output)
    assert verdict["status"] == "failed" and verdict["exercise"] == "same-device"
    assert {c["id"] for c in verdict["checks"] if not c["passed"]} >= {"runs", "same_device"}
    assert cli.invoke(main, ["grade", "no-such-exercise", str(ROOT / "README.md")], env=_env(tmp_path)).exit_code == 2
    assert cli.invoke(main, ["grade", "same-device", str(tmp_path / "missing.py")], env=_env(tmp_path)).exit_code == 2
    assert cli.invoke(main, ["grade", "same-device"], env=_env(tmp_path)).exit_code == 2
