"""Plain mode: run the learner's file as `__main__` and turn its uncaught exception into an exit code.

Both a one-process job (the package's main) and each rank of a job of several ranks (rank.py) run it.
"""

from __future__ import annotations

import sys

from app.harness import grade as _grade
from app.harness import interpreter, stdio


def print_learner_traceback(exc: BaseException, filename: str) -> None:
    """Print a traceback that starts at the learner's own file: the sandbox's frames are noise to them."""
    stdio.restore_streams()  # the learner's code may have set sys.stderr to None
    sys.stderr.write(_grade.format_learner_traceback(exc, filename))


def run_plain(code: str, filename: str, show_traceback=None) -> int:
    """Run code as `__main__` under filename; return the process exit code.

    show_traceback(text) shows the learner's traceback (default: on stderr, from the learner's own file on)."""
    namespace = interpreter.main_module(filename)
    _grade.KEPT_NAMESPACES.append(namespace)  # its objects are never finalised (see grade.KEPT_NAMESPACES)
    try:
        exec(compile(code, filename, "exec"), namespace)
        status = 0
    except SystemExit as exc:
        code_ = exc.code
        status = code_ if isinstance(code_, int) else (0 if code_ is None else 1)
    except BaseException as exc:  # the learner's error: show it, exit 1 like python would
        if show_traceback is None:
            print_learner_traceback(exc, filename)
        else:
            show_traceback(_grade.format_learner_traceback(exc, filename))
        status = 1
    interpreter.finish()  # its threads, then its atexit callbacks
    return status
