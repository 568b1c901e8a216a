"""Code that runs INSIDE the sandbox. It imports nothing from `app` outside this package.

`main(payload, report_fd)` is what a sandboxed child calls once it is isolated. The fork server imports this
package before forking, so the child never needs to read project files (which its mount namespace hides).

    grade.py         grading mode: run the learner's file under the tracer, then the exercise's probe; one report
    placement.py     the tracer (a TorchFunctionMode plus module, optimizer and DataLoader hooks)
    simulation.py    logical device labels: a CUDA GPU on a host without one
    availability.py  what torch.cuda / torch.backends.mps / torch.accelerator say is available
    wording.py       torch 2.13's own words for a device mismatch (from cuda_device_checks.json)
"""

from __future__ import annotations

import os
import sys
import traceback

# Imported here, in the fork server, before any fork: the sandboxed child cannot read project files.
from app.sandbox.harness import grade as _grade
from app.sandbox.harness import wording as _wording

_wording.warm_up()


def _print_learner_traceback(exc: BaseException, filename: str) -> None:
    """Print a traceback that starts at the learner's own file: the sandbox's frames are noise to them."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def run_plain(code: str, filename: str) -> int:
    """Run code as `__main__` under filename; return the process exit code."""
    namespace = {"__name__": "__main__", "__file__": filename, "__builtins__": __builtins__}
    try:
        exec(compile(code, filename, "exec"), namespace)
    except SystemExit as exc:
        code_ = exc.code
        return code_ if isinstance(code_, int) else (0 if code_ is None else 1)
    except BaseException as exc:  # the learner's error: show it, exit 1 like python would
        _print_learner_traceback(exc, filename)
        return 1
    return 0


def main(payload: dict, report_fd: int | None) -> int:
    """Run one job described by payload; return the exit code.

    mode "run": run the code and report nothing. mode "grade": run it under the placement tracer and write one
    JSON report of facts to report_fd (see grade.py); the verdict is decided outside the sandbox.
    """
    if payload.get("mode") == "grade":
        try:
            return _grade.run_grade(payload, report_fd)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    filename = payload.get("filename", "main.py")
    if report_fd is not None:
        os.close(report_fd)  # plain runs report nothing beyond their output
    status = run_plain(payload["code"], filename)
    sys.stdout.flush()
    sys.stderr.flush()
    return status
