"""`course grade` and the exercise half of `course check`, through the real sandbox."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from app.cli import main
from app.config import ROOT, Settings
from app.grading import check_exercises


def _env(tmp_path):
    return {"COURSE_ENV": "test", "COURSE_SECRET_KEY": "test-secret",
            "COURSE_DATABASE_URL": f"sqlite:///{tmp_path / 'course.db'}"}


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


def test_check_exercises_catches_a_check_that_cannot_fail_and_a_failing_solution(tmp_path):
    folder = tmp_path / "exercises" / "same-device"
    shutil.copytree(ROOT / "exercises" / "same-device", folder)
    for extra in sorted((folder / "wrong").glob("*.py"))[1:]:
        extra.unlink()
    (folder / "wrong" / "really_right.py").write_text("# expect: same_device\n" + (folder / "solution.py").read_text())
    (folder / "wrong" / "no_header.py").write_text("import torch\n")
    (folder / "wrong" / "unknown_id.py").write_text("# expect: gpu_is_fast\nimport torch\n")
    (folder / "solution.py").write_text((folder / "starter.py").read_text())
    settings = Settings(env="test", secret_key="test-secret", database_url=f"sqlite:///{tmp_path / 'c.db'}")
    errors = check_exercises(tmp_path / "exercises", settings)
    joined = "\n".join(map(str, errors))
    assert f"{folder / 'wrong' / 'no_header.py'}:1: the first line must be `# expect: <check_id>`" in joined
    assert "unknown_id.py:1: expects `gpu_is_fast`" in joined
    # static problems stop grading of that exercise; fix them and grade
    (folder / "wrong" / "no_header.py").unlink()
    (folder / "wrong" / "unknown_id.py").unlink()
    errors = [str(e) for e in check_exercises(tmp_path / "exercises", settings)]
    assert any(e.startswith(f"{folder / 'solution.py'}:10: the solution does not pass") for e in errors), errors
    assert f"{folder / 'wrong' / 'really_right.py'}:1: this wrong answer passes every check" in "\n".join(errors)


def test_check_exercises_passes_on_the_course(tmp_path):
    settings = Settings(env="test", secret_key="test-secret", database_url=f"sqlite:///{tmp_path / 'c.db'}")
    assert check_exercises(ROOT / "exercises", settings, grade=False) == []
