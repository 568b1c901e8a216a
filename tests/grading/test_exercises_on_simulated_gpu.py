"""Every exercise through the real sandbox: the solution passes, each wrong answer fails its named check, and
correct answers written in other styles pass too (a grader that only accepts the reference teaches the wrong lesson).

The sandbox simulates a CUDA GPU on this CPU-only host (the harness's logical device labels).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.config import ROOT

SLUGS = ["same-device", "pick-device", "training-loop", "bring-it-back", "model-internals", "ddp-training",
         "runs-on-a-mac"]
VARIANTS = Path(__file__).parent / "variants"
WRONG = [(slug, p) for slug in SLUGS for p in sorted((ROOT / "exercises" / slug / "wrong").glob("*.py"))]


def _expect(path: Path) -> str:
    return path.read_text().splitlines()[0].split("expect:")[1].strip()


@pytest.mark.parametrize("slug", SLUGS)
def test_solution_passes_on_simulated_gpu(grade, exercises, slug):
    verdict = grade(slug, exercises[slug].solution)
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]
    assert [c.id for c in verdict.checks] == exercises[slug].spec.check_ids
    assert verdict.device.startswith("cuda:0")


@pytest.mark.parametrize("slug", SLUGS)
def test_each_exercise_has_five_wrong_answers_and_three_hints(exercises, slug):
    assert len(exercises[slug].wrong) >= 5
    assert len(exercises[slug].hints) == 3


@pytest.mark.parametrize(("slug", "path"), WRONG, ids=[f"{s}/{p.stem}" for s, p in WRONG])
def test_wrong_answer_fails_its_named_check(grade, slug, path):
    expected = _expect(path)
    verdict = grade(slug, path.read_text())
    assert verdict.status == "failed"
    failed = {c.id: c for c in verdict.checks if not c.passed}
    assert expected in failed, verdict.checks
    assert failed[expected].message  # every failure says what happened and what to change


VARIANT_FILES = sorted(VARIANTS.glob("*/*.py"))


@pytest.mark.parametrize("path", VARIANT_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in VARIANT_FILES])
def test_correct_variant_in_another_style_passes(grade, path):
    verdict = grade(path.parent.name, path.read_text())
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]


@pytest.mark.parametrize("slug", SLUGS)
def test_at_least_four_variants_per_exercise(slug):
    assert len(list((VARIANTS / slug).glob("*.py"))) >= 4


def test_starter_messages_name_line_and_variable_and_say_the_error_once(grade, exercises):
    verdict = grade("same-device", exercises["same-device"].starter)
    runs, same = (next(c for c in verdict.checks if c.id == i) for i in ("runs", "same_device"))
    assert same.line == 10 and "`x`" in same.message and "x = x.to(device)" in same.message
    assert runs.line == 10 and "wrapper_CUDA_addmv_" in runs.message and "output above" in runs.message
    assert "wrapper_CUDA_addmv_" not in same.message  # the crash is `runs`; same_device says why


def test_training_loop_batch_message(grade):
    code = (ROOT / "exercises/training-loop/wrong/batch_not_moved.py").read_text()
    verdict = grade("training-loop", code)
    batch = next(c for c in verdict.checks if c.id == "batch_on_device")
    assert batch.line == 20
    assert batch.message.startswith("line 20: `xb` reached `Sequential` on the host; the model lives on the device")
    assert "`xb, yb = xb.to(device), yb.to(device)`" in batch.message  # both are on the host: one run, not two


def test_traceback_points_into_learner_file_without_sandbox_frames(grade, exercises):
    verdict = grade("same-device", exercises["same-device"].starter)
    assert 'File "main.py", line 10, in <module>' in verdict.stderr
    assert "harness" not in verdict.stderr and "placement.py" not in verdict.stderr
    assert ("RuntimeError: Expected all tensors to be on the same device, but got mat is on cuda:0, different from "
            "other tensors on cpu (when checking argument in method wrapper_CUDA_addmv_)") in verdict.stderr


def test_output_streams_through_on_output(grade, exercises):
    lines = []
    verdict = grade("training-loop", exercises["training-loop"].solution,
                    lambda event: lines.append((event.stream, event.line)))
    assert verdict.status == "passed"
    assert [line for s, line in lines if s == "stdout"][:1] == [verdict.stdout.splitlines()[0]]
    assert sum(1 for s, line in lines if line.startswith("epoch")) == 5


def test_printed_loss_tensor_is_caught_after_many_item_calls(grade, exercises):
    code = exercises["training-loop"].solution + "\nfor _ in range(300):\n    loss.item()\nprint('final', loss)\n"
    verdict = grade("training-loop", code)
    assert verdict.failed_ids() == ["loss_item"]
    assert next(c for c in verdict.checks if c.id == "loss_item").line == code.count("\n")


def test_endless_loop_times_out_under_the_exercise_limit(grading_runner, exercises):
    from app.grading import grade_submission

    ex = exercises["same-device"]
    quick = ex.model_copy(update={"spec": ex.spec.model_copy(update={"limits": {"wall_s": 2}})})
    verdict = grading_runner.call(grade_submission(quick, "while True:\n    pass\n", grading_runner.runner))
    assert verdict.status == "timeout" and not any(c.passed for c in verdict.checks)
    first, *rest = verdict.checks
    assert "limit of 2 s" in first.message and first.reached  # said once ...
    assert all(not c.reached and "limit" not in c.message for c in rest)  # ... the rest were never reached


def test_sys_exit_with_an_error_status_fails_runs(grade, exercises):
    verdict = grade("same-device", exercises["same-device"].solution + "\nimport sys\nsys.exit(3)\n")
    runs = next(c for c in verdict.checks if c.id == "runs")
    assert not runs.passed and "sys.exit(3)" in runs.message


def test_dropped_to_result_is_named_at_its_own_line(grade):
    code = (ROOT / "exercises/same-device/wrong/unassigned_to.py").read_text()
    same = next(c for c in grade("same-device", code).checks if c.id == "same_device")
    assert same.line == 10 and same.message.startswith("line 10: `x.to(...)` made a copy of `x` on cuda:0 and "
                                                       "dropped it")


def test_one_dropped_copy_is_explained_once(grade):
    code = (ROOT / "exercises/training-loop/wrong/to_without_assignment.py").read_text()
    checks = {c.id: c for c in grade("training-loop", code).checks}
    assert checks["batch_on_device"].line == 20 and "made a copy of `xb`" in checks["batch_on_device"].message
    assert checks["same_device"].message == "line 20: the same cause as `batch_on_device` above."
    assert checks["runs"].line == 22 and [c.id for c in checks.values() if not c.reached] == ["loss_item", "trains"]


def test_a_wrong_return_is_the_line_link_and_code_after_it_is_named(grade):
    code = ("import torch\n\n\ndef pick_device():\n    return torch.device(\"cuda\")\n"
            "    if torch.cuda.is_available():\n        return torch.device(\"cuda\")\n"
            "    return torch.device(\"cpu\")\n")
    checks = {c.id: c for c in grade("pick-device", code).checks}
    assert checks["uses_mps"].line == 5 and "code after this `return` (lines 6-8) never runs" in \
        checks["uses_mps"].message
    assert checks["falls_back_to_cpu"].message == "line 5: the same cause as `uses_mps` above."


def test_a_crash_in_an_exercise_without_a_runs_check_is_its_first_failing_check(grade):
    checks = grade("bring-it-back", "import torch\nprint(undefined_name)\n").checks
    assert checks[0].line == 2 and "NameError" in checks[0].message and checks[0].reached
    assert all(not c.reached for c in checks[1:])


def test_a_training_loop_starter_says_each_sentence_once(grade, exercises):
    verdict = grade("training-loop", exercises["training-loop"].starter)
    text = " ".join(c.message for c in verdict.checks)
    assert text.count("There is no global `device`") == 1
