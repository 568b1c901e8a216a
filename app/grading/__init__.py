"""Grading: run a submission under the placement harness and decide its checks from the harness's report.

    grade_submission(exercise, code, runner, on_output=None) -> Verdict     (async; streams output lines)
    check_loaded(exercises, settings) -> list[ContentError]                 (what `course check` runs)
    check_exercises(exercises_dir, settings) -> list[ContentError]          (the same, loading a folder first)
"""

from app.grading.content_check import check_exercises, check_loaded
from app.grading.grader import build_job, evaluate, grade_submission
from app.grading.verdict import CheckResult, Verdict

__all__ = ["CheckResult", "Verdict", "build_job", "check_exercises", "check_loaded", "evaluate", "grade_submission"]
