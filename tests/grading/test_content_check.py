"""The exercise half of `course check`: the course's standard, then every answer through the real sandbox."""

from __future__ import annotations

import shutil

from app.core.config import ROOT
from app.grading import check_exercises
from tests.helpers import make_settings


def test_check_exercises_catches_a_check_that_cannot_fail_and_a_failing_solution(tmp_path):
    folder = tmp_path / "exercises" / "same-device"
    shutil.copytree(ROOT / "exercises" / "same-device", folder)
    for extra in sorted((folder / "wrong").glob("*.py"))[1:]:
        extra.unlink()
    (folder / "wrong" / "really_right.py").write_text("# expect: same_device\n" + (folder / "solution.py").read_text())
    (folder / "wrong" / "no_header.py").write_text("import torch\n")
    (folder / "wrong" / "unknown_id.py").write_text("# expect: gpu_is_fast\nimport torch\n")
    (folder / "solution.py").write_text((folder / "starter.py").read_text())
    settings = make_settings(tmp_path)
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
    settings = make_settings(tmp_path)
    assert check_exercises(ROOT / "exercises", settings, grade=False) == []
