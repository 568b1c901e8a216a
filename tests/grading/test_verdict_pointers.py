"""Verdicts point at the cause, not the symptom (issue 29), through the real sandbox as `course grade` grades.

Each test grades one program a learner wrote and reads the verdict the page shows: the line a finding links,
the names it gives, the checks it does not tick when nothing ran, the advice a passing program still gets.
The programs that are not an exercise's own wrong answers are in tests/grading/findings/.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config import ROOT

FINDINGS = Path(__file__).parent / "findings"


def _check(verdict, check_id):
    return next(c for c in verdict.checks if c.id == check_id)


@pytest.mark.parametrize(("slug", "written", "used"), [("same-device", 5, 8), ("training-loop", 6, 14)])
def test_a_hard_coded_cuda_is_flagged_where_it_is_written(grade, slug, written, used):
    code = (ROOT / "exercises" / slug / "wrong/hard_coded_cuda.py").read_text()
    assert 'torch.device("cuda")' in code.splitlines()[written - 1]
    picks = _check(grade(slug, code), "picks_device")
    assert picks.line == written, picks
    assert picks.message.startswith(f"line {written}: the device is hard-coded here")
    assert f"line {used}" in picks.message


def test_a_cuda_literal_on_the_line_that_moves_is_flagged_there(grade, exercises):
    code = exercises["same-device"].solution.replace("x.to(device)", 'x.to("cuda")').replace(
        'torch.device("cuda" if torch.cuda.is_available() else "cpu")', "torch.device('cpu')")
    lines = code.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if 'x.to("cuda")' in text)
    picks = _check(grade("same-device", code), "picks_device")
    assert picks.line == line, picks


def test_move_the_model_links_the_line_that_builds_it(grade, exercises):
    verdict = grade("training-loop", exercises["training-loop"].starter)
    model = _check(verdict, "model_on_device")
    assert "model = nn.Sequential(" in exercises["training-loop"].starter.splitlines()[model.line - 1]
    assert model.line == 12 and "Move it once, right after building it" in model.message
    assert "first forward pass (line 18)" in model.message


@pytest.mark.parametrize("code_of", ["starter", "wrong/batch_not_moved.py"])
def test_move_the_batch_names_inputs_and_targets_when_both_are_on_the_host(grade, exercises, code_of):
    code = exercises["training-loop"].starter if code_of == "starter" else \
        (ROOT / "exercises/training-loop" / code_of).read_text()
    batch = _check(grade("training-loop", code), "batch_on_device")
    assert "`xb, yb = xb.to(device), yb.to(device)`" in batch.message, batch


def test_only_the_targets_when_the_inputs_moved(grade):
    code = (ROOT / "exercises/training-loop/wrong/targets_not_moved.py").read_text()
    batch = _check(grade("training-loop", code), "batch_on_device")
    assert "xb.to(device)" not in batch.message and "yb = yb.to(device)" in batch.message


def test_a_syntax_error_ticks_no_device_check(grade):
    verdict = grade("same-device", (FINDINGS / "syntax_error.txt").read_text())
    assert [c.id for c in verdict.checks if c.passed] == []
    same = _check(verdict, "same_device")
    assert same.reached is False and same.message == "not reached: nothing ran, line 4 is not valid Python"


def test_a_timeout_names_no_cpu_and_blames_the_syncs_of_a_printing_loop(grade):
    verdict = grade("same-device", (FINDINGS / "prints_gpu_tensor_in_loop.py").read_text())
    # 100,000 lines of a GPU tensor: the time or the output limit, whichever a loaded machine meets first
    assert verdict.status in ("timeout", "failed") and not verdict.checks[0].passed
    assert verdict.device == ""  # no report: the device is unknown, and the status must not say "on cpu"
    first = verdict.checks[0].message
    assert "Line 8 calls `print(...)` inside a loop" in first and "sync" in first
    assert "never ends" not in first


def test_a_sync_on_every_step_passes_with_advice_counting_the_syncs(grade):
    verdict = grade("training-loop", (FINDINGS / "item_every_step.py").read_text())
    assert verdict.status == "passed"
    [advice] = verdict.advice
    assert advice.line == 20 and advice.message.startswith("line 20: `loss.item()` ran 20 times inside the loop")
    assert "sync" in advice.message


def test_logging_once_per_epoch_gets_no_advice(grade, exercises):
    assert grade("training-loop", exercises["training-loop"].solution).advice == []


def test_the_placement_table_names_the_tensors_copied_not_the_assignment(grade):
    code = (ROOT / "exercises/model-internals/wrong/statistics_moved_in_forward.py").read_text()
    verdict = grade("model-internals", code)
    [entry] = [e for e in verdict.placement if e.line == 20]
    assert entry.names == ["self.mean", "self.std"]
    assert entry.summary == "line 20: self.mean, self.std [8] -> cuda:0, 2 times"


def test_lesson_one_quotes_the_message_the_same_device_starter_gets(grade, exercises):
    """Lesson 1's rule about the operand the message names holds for the starter learners run first."""
    verdict = grade("same-device", exercises["same-device"].starter)
    [raised] = [line for line in verdict.stderr.splitlines() if line.startswith("RuntimeError: Expected all")]
    lesson = (ROOT / "lessons/01-cpu-gpu-border.md").read_text()
    assert raised in lesson
    assert "mat is on cuda:0, different from other tensors on cpu" in raised  # the operand that moved is named
    assert "does not tell you\nwhich operand was left behind" in lesson
    same = _check(verdict, "same_device")
    assert "`x` (on cpu)" in same.message  # the verdict names the one still on the host
