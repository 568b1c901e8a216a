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


@pytest.mark.slow  # one command, starting a sandbox
def test_course_grade_rows_name_their_check_and_point_at_the_cause(tmp_path):
    """Issue 29's verdict wording as `course grade` prints it: every row starts with its check's id, so "the same
    cause as `batch_on_device` above" can be followed; a row never reached names its check; the batch advice
    moves inputs and targets together; the line is said once per row."""
    wrong = ROOT / "exercises/training-loop/wrong/batch_not_moved.py"
    result = CliRunner().invoke(main, ["grade", "training-loop", str(wrong)], env=_env(tmp_path))
    assert result.exit_code == 1, result.output
    rows = {line.split()[1]: line for line in result.output.splitlines() if line[:6] in ("  PASS", "  FAIL", "  ----")}
    assert list(rows) == ["runs", "picks_device", "model_on_device", "model_moved_once", "batch_on_device",
                          "same_device", "loss_item", "trains"]
    assert rows["batch_on_device"].startswith("  FAIL batch_on_device  line 20: ")
    assert "`xb, yb = xb.to(device), yb.to(device)`" in rows["batch_on_device"]
    assert rows["same_device"] == "  FAIL same_device  line 20: the same cause as `batch_on_device` above."
    assert rows["trains"] == "  ---- trains  not reached: the program stopped at line 20"
    assert all(row.count("line 20") <= 1 for row in rows.values())


@pytest.mark.slow  # three commands, each starting a sandbox
@pytest.mark.parametrize(("slug", "wrong", "line"), [("same-device", "cuda_method", 10),
                                                     ("training-loop", "model_cuda_method", 14),
                                                     ("training-loop", "batch_cuda_method", 20)])
def test_course_grade_fails_a_hard_coded_cuda_with_the_laptops_own_error(tmp_path, slug, wrong, line):
    """Issue 27: `.cuda()` runs on the simulated GPU, so only running the script on a laptop without one shows the
    check's promise ("so the script also runs without a GPU") is broken: the row names the line and that
    machine's own error, while the program's own run passes everything else."""
    result = CliRunner().invoke(main, ["grade", slug, str(ROOT / f"exercises/{slug}/wrong/{wrong}.py")],
                                env=_env(tmp_path))
    assert result.exit_code == 1, result.output
    rows = {line.split()[1]: line for line in result.output.splitlines() if line[:6] in ("  PASS", "  FAIL", "  ----")}
    assert rows["picks_device"].startswith(
        f"  FAIL picks_device  line {line}: on a CPU-only laptop (the CPU-only torch wheel, no GPU) this line stops "
        "the program: AssertionError: Torch not compiled with CUDA enabled.")
    assert [r for r in rows.values() if r.startswith("  FAIL")] == [rows["picks_device"]]
