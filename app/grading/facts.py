"""Read the harness's report and turn common facts into checks (used by every exercise's checks.py).

The report is the JSON the placement harness wrote from inside the sandbox (app/harness/grade.py; its shape is
`Report` in app/harness/contract.py):
`outcome` (how the learner's file ended), `trace` (events by kind: mismatch, move, forward, host_input,
host_read, tensor_print, backward, step, loss_fn, module_move, numpy_on_accelerator and the distributed ones; `counts`
per kind, batches and device queries among them, which are only counted), `probe` (the exercise probe's answers),
`tampered` (torch functions the learner's code replaced), `device` and `accelerator`.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.grading.source import hard_coded_device_line
from app.grading.verdict import CheckResult
from app.harness.contract import Report


def check(id: str, passed: bool, message: str = "", line: int | None = None, *,
          cause: str | None = None, vacuous: bool = False) -> CheckResult:
    """Build one check result (a passing check needs no message). `cause` names what a failure comes down to,
    so that checks failing for the same cause are worded once (app/grading/check_messages.py). `vacuous`: the check
    passed only because what it looks for never happened (no two devices met), which says nothing when the
    program stopped early (see mark_unreached)."""
    return CheckResult(id=id, passed=passed, message="" if passed else message, line=None if passed else line,
                       cause=None if passed else cause, vacuous=passed and vacuous)


def name_of(tensor_fact: dict, fallback: str = "a tensor") -> str:
    """The learner's variable name for a tensor fact, in backticks, or fallback."""
    names = tensor_fact.get("names") or []
    return f"`{names[0]}`" if names else fallback


def at(line: int | None) -> str:
    """'line 12: ' or '' when the line is unknown."""
    return f"line {line}: " if line else ""


@dataclass
class Facts:
    """The report, with accessors that never raise on a missing part."""

    report: Report
    code: str | None = None  # the learner's source, for the lines the trace cannot name (app/grading/source.py)

    @property
    def accelerator(self) -> str:
        return self.report.get("accelerator") or "cuda:0"

    @property
    def outcome(self) -> dict:
        return self.report.get("outcome") or {}

    @property
    def broke_elsewhere(self) -> dict | None:
        """The first other machine (a check's `also_runs_on`) where the program stopped with an exception although
        it finished here: {"machine", "title", "exception": {"type", "message", "line"}}; None when none did."""
        if self.outcome.get("exception") is not None:
            return None  # it does not run here either: the run's own failure says more
        return next((m for m in self.report.get("elsewhere") or () if m.get("exception")), None)

    @property
    def probe(self) -> dict:
        return self.report.get("probe") or {}

    @property
    def tampered(self) -> list[str]:
        return self.report.get("tampered") or []

    @property
    def stopped_line(self) -> int | None:
        """The learner's line where the program stopped early: an exception, or sys.exit() with an error status."""
        exc = self.outcome.get("exception")
        if exc:
            return exc.get("line")
        if self.outcome.get("system_exit") and self.outcome.get("exit_code") not in (0, None):
            return self.outcome.get("exit_line")
        return None

    def events(self, kind: str) -> list[dict]:
        """Recorded events of one kind, in order."""
        return (self.report.get("trace") or {}).get("events", {}).get(kind, [])

    def count(self, kind: str) -> int:
        """How many events of one kind happened (beyond those kept)."""
        return (self.report.get("trace") or {}).get("counts", {}).get(kind, 0)

    @property
    def ops(self) -> list[dict]:
        """The learner's torch calls, summed per (line, op, devices of the first tensors)."""
        return (self.report.get("trace") or {}).get("ops", [])

    @property
    def first_placement(self) -> dict | None:
        """The first tensor the learner's code put on an accelerator: line, device, whether it had asked."""
        return (self.report.get("trace") or {}).get("first_placement")

    @property
    def losses(self) -> list[float]:
        return (self.report.get("trace") or {}).get("losses", [])

    @property
    def steps(self) -> int:
        return (self.report.get("trace") or {}).get("steps", 0)

    def on_accelerator(self, device: str | None) -> bool:
        """True for an accelerator device string ("cuda:0", "mps:0")."""
        return bool(device) and not str(device).startswith("cpu")

    def tamper_note(self) -> str:
        """A sentence about torch functions the learner replaced, or ''."""
        if not self.tampered:
            return ""
        names = ", ".join(f"`{n}`" for n in self.tampered)
        return (f" Your code replaced {names}; the grader pretends to be a machine with {self.accelerator}, "
                "so leave torch's own functions alone.")


def mark_unreached(results: list[CheckResult], facts: Facts) -> list[CheckResult]:
    """Word the checks the program never reached as such, instead of as failures of their own.

    One mistake that stops the program (a tensor left on the host raises at line N) would otherwise fail every
    check whose subject comes later ("the loss was never printed", "optimizer.step() never ran"). The rule,
    the same for every exercise: a failed check that names no line has found nothing of its own to blame; when
    the program stopped early, that absence is the stop's doing. Its message becomes `not reached: the program
    stopped at line N` (`not reached: nothing ran, line N is not valid Python` for a syntax error, which stops the
    file before its first line runs) and `reached` becomes False. Checks that name a line (the one that explains
    the stop, or a mistake made before it) keep their own words. A check that passed only because nothing it looks for
    happened (`vacuous`: no two devices met) is not reached either: a program stopped at a syntax error ran none
    of it. When none of them names the line where an exception
    stopped the program, the first such check reports the exception there instead: the crash is always a
    failing check with its line link.
    """
    line = facts.stopped_line
    if line is None:
        return results
    exc = facts.outcome.get("exception")
    # Python refuses a file with a syntax error before its first line runs: nothing "stopped" at line N
    why = f"nothing ran, line {line} is not valid Python" if not compiles(facts.code) else \
        f"the program stopped at line {line}"
    out = [r if (r.passed and not r.vacuous) or r.line is not None else
           CheckResult(id=r.id, passed=False, message=f"not reached: {why}", line=None, reached=False)
           for r in results]
    if exc and not any(not r.passed and r.line == line for r in out):
        first = next((i for i, r in enumerate(out) if not r.reached), None)
        if first is not None:
            out[first] = CheckResult(id=out[first].id, passed=False, message=crash_message(exc), line=line)
    return out


def compiles(code: str | None) -> bool:
    """True unless the code is not valid Python (unknown code counts as valid: the run says more than a guess)."""
    try:
        compile(code or "", "main.py", "exec", dont_inherit=True)  # compiles, never runs: nothing of it executes
    except (SyntaxError, ValueError):
        return False
    except (RecursionError, MemoryError):  # nesting too deep for the compiler here: let the run's own words stand
        return True
    return True


def crash_message(exc: dict) -> str:
    """'line 7: NameError: name 'x' is not defined; the traceback is in the output above.'"""
    return f"{at(exc.get('line'))}{exc['type']}: {first_line(exc['message'])}; the traceback is in the output above."


def check_runs(facts: Facts) -> CheckResult:
    """`runs`: the file finished without an exception."""
    exc = facts.outcome.get("exception")
    code = facts.outcome.get("exit_code")
    if facts.outcome.get("finished", False) and exc is None and code in (0, None):
        return check("runs", True)
    if exc is None and facts.outcome.get("system_exit"):
        line = facts.outcome.get("exit_line")
        return check("runs", False, f"{at(line)}the program stopped itself with `sys.exit({code!r})`; let it run to "
                                    "its end.", line)
    if exc is None:
        return check("runs", False, "the program did not finish.")
    return check("runs", False, crash_message(exc), exc.get("line"))


ASK_FOR_DEVICE = "`device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")`"


def machine_phrase(title: str) -> str:
    """'a CPU-only laptop (...)' from a profile's title 'A CPU-only laptop (...)'; 'a MacBook Pro ...' otherwise."""
    return "a" + title[1:] if title.startswith("A ") else f"a {title}"


def elsewhere_message(away: dict) -> str:
    """'on a CPU-only laptop (...) this line stops the program: AssertionError: Torch not compiled ...'"""
    exc = away["exception"]
    return (f"on {machine_phrase(away.get('title') or away['machine'])} this line stops the program: "
            f"{exc.get('type')}: {first_line(exc.get('message') or '')}")


def check_runs_on(facts: Facts, check_id: str, machine: str) -> CheckResult:
    """`check_id`: the program also runs to its end on `machine` (a profile id the check's `also_runs_on` names)."""
    away = next((m for m in facts.report.get("elsewhere") or () if m.get("machine") == machine), None)
    if away is None:
        return check(check_id, False, f"the grader could not run the program on {machine} (a grader problem, "
                                      "not yours); run it again.")
    if facts.outcome.get("exception") is not None:
        return check(check_id, False, "")  # it stops here already: mark_unreached words it
    if away.get("exception"):
        line = away["exception"].get("line")
        return check(check_id, False, f"{at(line)}{elsewhere_message(away)}.", line)
    if not away.get("completed"):
        return check(check_id, False, f"on {machine_phrase(away.get('title') or machine)} the program did not "
                                      "finish in the time the grader gives it; make it stop sooner.")
    return check(check_id, True)


def check_picks_device(facts: Facts) -> CheckResult:
    """`picks_device`: the program asked torch which device is usable before it put anything on one, and (where
    the check names other machines) runs on them too."""
    away = facts.broke_elsewhere
    placed = facts.first_placement
    if placed and not placed.get("asked"):
        used = placed.get("line")
        written = hard_coded_device_line(facts.code, used) or used  # the fix goes where "cuda" is written
        if written == used:
            what = (f"a tensor went to {placed.get('device')} before the program asked torch whether a GPU is usable: "
                    "a hard-coded \"cuda\" stops at this line on a machine without one")
        else:
            what = (f"the device is hard-coded here, and line {used} put a tensor on {placed.get('device')} with it "
                    f"before the program asked torch whether a GPU is usable: on a machine without one, line {used} "
                    "stops the program")
        if away and away["exception"].get("line") == used:  # the other machine's own words for the same line
            what += f" ({elsewhere_message(away)})"
        return check("picks_device", False, f"{at(written)}{what}. Pick the device by asking: {ASK_FOR_DEVICE}.",
                     written)
    if away:
        line = away["exception"].get("line")
        return check("picks_device", False, f"{at(line)}{elsewhere_message(away)}. A device written into the code "
                                            "(`.cuda()`, `.to(\"cuda\")`, `device=\"cuda\"`) exists only on a machine "
                                            f"with that GPU; pick it by asking: {ASK_FOR_DEVICE}, and use `device` "
                                            "everywhere.", line)
    if not placed and not facts.count("device_query"):
        return check("picks_device", False, "the program never asks torch which device is usable, so it never uses "
                                            f"a GPU, even where there is one; pick it by asking: {ASK_FOR_DEVICE}.")
    return check("picks_device", True)


def check_same_device(facts: Facts) -> CheckResult:
    """`same_device`: no op mixed an accelerator tensor with a host tensor."""
    mismatches = facts.events("mismatch")
    if not mismatches:
        return check("same_device", True, vacuous=True)
    m = mismatches[0]
    tensors = m.get("tensors") or []
    host = [t for t in tensors if not facts.on_accelerator(t.get("device")) and t.get("dim", 1) > 0]
    accel = [t for t in tensors if facts.on_accelerator(t.get("device"))]
    host_name = name_of(host[0], "") if host else ""
    accel_name = name_of(accel[0], "a tensor on the device") if accel else "a tensor on the device"
    if host_name:
        var = host_name.strip("`")
        dropped = discarded_move(facts, var)
        if dropped is not None:
            return check("same_device", False, dropped_copy_message(
                dropped, var, f"line {m.get('line')} used `{var}` on the host with {accel_name}"), dropped["line"],
                cause=dropped_cause(dropped, var))
        what = f"{host_name} (on cpu) and {accel_name} (on {facts.accelerator}) met in one operation"
        fix = f"Move it to the device first: `{var} = {var}.to(device)`."
    else:
        what = f"{accel_name} (on {facts.accelerator}) met a tensor on the host (cpu) in one operation"
        fix = ("Whatever is still on the host needs `.to(device)`: often a model's parameters "
               "(`model = model.to(device)`) or a tensor made without `device=`.")
    # when the program stopped here, `runs` quotes torch's error already: say what met, not the error again
    message = "" if facts.stopped_line == m.get("line") else first_line(m.get("message", ""))
    raises = f"; a GPU raises RuntimeError: {message}{'' if message.endswith(('!', '.')) else '.'}" if message else "."
    return check("same_device", False, f"{at(m.get('line'))}{what}{raises} {fix}", m.get("line"),
                 cause=host_cause(var, m.get("line")) if host_name else None)


def host_cause(var: str, line: int | None) -> str:
    """The cause key of a host tensor `var` used with device tensors at `line`."""
    return f"host:{var}@{line}"


def dropped_cause(move: dict, var: str) -> str:
    """The cause key of a dropped `.to()` copy of `var`."""
    return f"dropped:{var}@{move['line']}"


def discarded_move(facts: Facts, var: str) -> dict | None:
    """The learner's `.to()` that copied `var` to the device without keeping the copy, or None."""
    for e in facts.events("move"):
        if var in (e.get("names") or []) and facts.on_accelerator(e.get("dst_device")) \
                and not facts.on_accelerator(e.get("src_device")):
            return e
    return None


def dropped_copy_message(move: dict, var: str, consequence: str) -> str:
    """The cause, at the move's line: 'line 9: `x.to()` made a copy ... and dropped it ..., so <consequence>. ...'"""
    return (f"{at(move['line'])}`{var}.{move['op']}(...)` made a copy of `{var}` on {move['dst_device']} and dropped "
            f"it: `.{move['op']}()` returns a new tensor and leaves `{var}` where it was, so {consequence}. Keep the "
            f"copy: `{var} = {var}.to(device)`.")


def first_line(text: str) -> str:
    """The first line of a message, without a trailing full stop (messages are embedded in sentences)."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:-1] if line.endswith(".") else line
