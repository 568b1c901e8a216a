"""Grading: run a submission under the placement harness and decide its checks from the harness's report.

    prepare(exercise, code, limits=...) -> Grading   the job to submit; Grading.verdict(result) judges its result
    follow(handle, on_output=None) -> Result         (async) a submitted job's output lines, then its result
    grade_submission(exercise, code, runner, on_output=None) -> Verdict     (async; all three, for the CLI)
    check_loaded(exercises, settings) -> list[ContentError]                 (what `course check` runs)
    check_exercises(exercises_dir, settings) -> list[ContentError]          (the same, loading a folder first)
"""

from app.grading.content_check import check_exercises, check_loaded
from app.grading.grader import Grading, build_job, evaluate, follow, grade_submission, prepare, refused
from app.grading.verdict import CheckResult, Verdict

__all__ = ["CheckResult", "Grading", "Verdict", "build_job", "check_exercises", "check_loaded", "evaluate", "follow",
           "grade_submission", "prepare", "refused"]
