"""A warning torch gives inside a call the simulation intercepted names the line it names without the simulation.

Python names a warning's place by walking `stacklevel` frames up from where it was given. The simulation's mode runs
the learner's torch calls from its own frames, so a warning given there named the harness: `torch.tensor(t)` at the
learner's line 4 printed "/srv/.../app/harness/tracing/placement.py:678: UserWarning: To copy construct from a
tensor ..." with the harness's source line under it, where a real run prints "main.py:4: ..." and the learner's own
line; `F.mse_loss` with mismatched sizes named the harness's simulation.py, not torch's loss.py.

Every warning that is shown passes through `warnings._showwarnmsg` (the C warnings module calls it, and so does
`warnings.warn_explicit`; `catch_warnings(record=True)` records through it). Wrapped here, it moves a warning that
names a harness frame to the frame that place stands for, while that frame is still on the stack: nothing is done
per torch call, only per warning shown. Found by walking up from the warning:
- the harness's frames that run the intercepted call, counted: a warning given `stacklevel` frames up names the
  n-th of them; then torch's dispatch to the mode (torch/overrides.py's handle_torch_function), and, where there was
  one, the torch function that dispatched (the mode ran it again, below, where the warning was given);
- then the n-th frame from there: what the warning would have named; where that is past the learner's outermost
  frame (the harness's or the sandbox's own), "sys":1, as Python names a stacklevel beyond the stack.
What is not found (a warning the harness gives of its own) is shown as it was.

Python shows a warning once per place (the "default" action): it keys its registry by the frame it picked, the
module's `__warningregistry__`, before showing. So the same warning at two of the learner's lines, both given inside
intercepted calls, would show once; the key goes back from the harness's registry to the registry of the place the
warning is moved to (a second warning from that place is not shown again). A warning shown "always" has no key, and
is always shown; the "module" action's key (once per module) stays the harness's.
"""

from __future__ import annotations

import os
import sys
import warnings

HARNESS = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package's folder
APP = os.path.dirname(HARNESS.rstrip(os.sep)) + os.sep  # the sandbox's frames below the learner's file are here too
BEYOND_THE_STACK = ("sys", 1)  # what Python names for a stacklevel past the outermost frame (Python/_warnings.c)
# torch's dispatch of a Python function to a mode (handle_torch_function and its helpers)
DISPATCH = os.path.join("torch", "overrides.py")

_SHOWN = None  # warnings._showwarnmsg as found, before install()


def install() -> None:
    """Wrap warnings._showwarnmsg (once per process)."""
    global _SHOWN
    if _SHOWN is None:
        _SHOWN = warnings._showwarnmsg
        warnings._showwarnmsg = _showwarnmsg


def _showwarnmsg(msg) -> None:
    if msg.filename.startswith(HARNESS):
        found = named_frame(sys._getframe(1), msg.filename, msg.lineno)
        if found is not None:
            named, place, frame = found
            if not _first_from(named, frame, place, msg):
                return
            msg.filename, msg.lineno = place
            msg.line = None  # read again from the file named (linecache holds the learner's)
    _SHOWN(msg)


def _first_from(named, frame, place: tuple[str, int], msg) -> bool:
    """Move the warning's once-per-place key from the registry of the harness frame `named` (where Python put it)
    to that of `frame`, at `place`; False where that place has shown it already."""
    harness = named.f_globals.get("__warningregistry__")
    key = (str(msg.message), msg.category, msg.lineno)
    if harness is None or harness.pop(key, None) is None or frame is None:
        return True  # "always" (no key): shown every time; beyond the stack: sys's registry, left alone
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    if registry.get("version") != harness.get("version"):  # filters changed since: Python clears it, as here
        registry.clear()
        registry["version"] = harness.get("version")
    moved = (key[0], key[1], place[1])
    if registry.get(moved):
        return False
    registry[moved] = True
    return True


def named_frame(frame, filename: str, lineno: int):
    """(the harness frame a warning named as `filename`:`lineno`, the (file, line) it stands for, that frame: None
    beyond the stack), walking up from `frame` (the warning's); None where the warning names no harness frame."""
    # up to the harness's frames, then to the one the warning named, counting them
    while frame is not None and not frame.f_code.co_filename.startswith(HARNESS):
        frame = frame.f_back
    count = 0
    while frame is not None and frame.f_code.co_filename.startswith(HARNESS):
        count += 1
        if frame.f_code.co_filename == filename and frame.f_lineno == lineno:
            break
        frame = frame.f_back
    if frame is None or count == 0:
        return None
    named = frame
    # past the rest of the harness's frames and torch's dispatch (and the function that dispatched)
    while frame is not None and frame.f_code.co_filename.startswith(HARNESS):
        frame = frame.f_back
    dispatched = False
    while frame is not None and frame.f_code.co_filename.endswith(DISPATCH):
        frame, dispatched = frame.f_back, True
    if dispatched and frame is not None:
        frame = frame.f_back
    for _ in range(count - 1):
        if frame is None:
            break
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename.startswith(APP):
        return named, BEYOND_THE_STACK, None
    return named, (frame.f_code.co_filename, frame.f_lineno), frame
