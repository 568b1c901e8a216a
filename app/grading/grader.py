"""Grade one submission: run it in the sandbox under the placement harness, then decide each check outside.

The harness only reports facts (on its own pipe, echoing a per-job key it gets only after the learner's code has
run); every pass/fail decision is made here
and in the exercise's checks.py, from that report. stdout is shown to the learner but never read for a verdict,
so printing "passed", writing files or exiting early cannot pass an exercise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.content import machine_choices
from app.content.exercises import Exercise
from app.core.config import get_settings
from app.grading.advice import sync_advice, timeout_hint
from app.grading.check_messages import tidy, unreachable_after
from app.grading.facts import Facts, check, mark_unreached
from app.grading.paths import scrub
from app.grading.placement_map import assigned_names, loop_lines, moved_names, placement_map
from app.grading.syntax import Source, holding, read_ahead
from app.grading.timeline import describe as describe_timeline
from app.grading.verdict import CheckResult, Verdict
from app.harness.contract import elsewhere_machine, job_host
from app.runner.base import Busy, Job, JobHandle, OnOutput, OutputEvent, Rejected, Result, Runner, emit

_CHECK_MODULES: dict[Path, tuple[float, Any]] = {}
# A SIGKILL with no limit named and no report came from outside the job: inside its pid namespace the job is
# pid 1, which none of its own processes can SIGKILL, and the limits enforced by SIGKILL (wall, CPU, memory,
# pids) are named in limit_hit. An exit code (`os._exit(0)`) is the program's own doing and still fails.
KILLED_MESSAGE = ("The sandbox process running this code was killed from outside (SIGKILL) before it finished; "
                  "this is not your code's fault: run it again.")


def exercise_limits(exercise: Exercise, base):
    """The runner's limits, tightened (never loosened) by the exercise's `limits:`; None keeps the defaults."""
    if base is None or not exercise.spec.limits:
        return None
    tighter = {k: type(getattr(base, k))(min(getattr(base, k), v)) for k, v in exercise.spec.limits.items()}
    return dataclasses.replace(base, **tighter)


def build_job(exercise: Exercise, code: str, *, limits=None, machine: str | None = None) -> tuple[Job, str]:
    """Return the sandbox job for a submission and the key (nonce) its report must echo (never in its payload).

    `machine` is the learner's "Run on" choice (app/content/machine_choices.py; one the exercise does not offer
    runs on its default); None: the exercise's own machine, else COURSE_SIM_MACHINE's (`course grade`, `course
    check`, submissions stored before the picker)."""
    nonce = secrets.token_hex(16)
    grade = {"exercise": exercise.slug, "probe": exercise.probe}
    others = sorted({m for c in exercise.spec.checks for m in c.also_runs_on})
    if others:  # a check promises the script runs on these machines too: the harness runs it there beside
        grade["elsewhere"] = [elsewhere_machine(m) for m in others]
    choice = machine_choices.pick(machine_choices.for_exercise(exercise.spec), machine, strict=False) \
        if machine else None
    # the simulated host, where the job finds no GPU: the picked machine, else the exercise's, else
    # COURSE_SIM_MACHINE's
    host = job_host(get_settings(), machine=choice.machine if choice else exercise.spec.machine,
                    gpus=choice.gpus if choice else exercise.spec.gpus)
    job = Job(code=code, filename="main.py", mode="grade", grade=grade, limits=limits,
              gpu=exercise.spec.needs_gpu and (choice is None or choice.cuda),
              host=host, nproc=exercise.spec.nproc, nnodes=exercise.spec.nnodes,
              launcher=exercise.spec.launcher, key=nonce)
    return job, nonce


def checks_module(exercise: Exercise):
    """Import the exercise's checks.py (cached until the file changes)."""
    path = exercise.checks_path
    mtime = path.stat().st_mtime
    cached = _CHECK_MODULES.get(path)
    if cached and cached[0] == mtime:
        return cached[1]
    spec = importlib.util.spec_from_file_location(f"course_checks_{exercise.slug.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _CHECK_MODULES[path] = (mtime, module)
    return module


def _stopped(exercise: Exercise, message: str) -> list[CheckResult]:
    """The program was stopped before it could be judged: the first check says why, once; the rest were never
    reached."""
    ids = [c.id for c in exercise.spec.checks]
    return [check(ids[0], False, message)] + [
        CheckResult(id=i, passed=False, message="not reached: the program was stopped first", reached=False)
        for i in ids[1:]]


def evaluate(exercise: Exercise, result: Result, nonce: str | None, code: str | None = None) -> Verdict:
    """Turn a sandbox Result (with the harness's report) into a Verdict; `code` lets messages name its lines."""
    base = dict(exercise=exercise.slug, stdout=result.stdout, stderr=result.stderr, duration_ms=result.duration_ms)
    if result.status in ("error", "cancelled"):  # the sandbox broke or the job was stopped: not the learner's fault
        return Verdict(status="error", checks=[], **{**base, "stderr": _join(result.stderr, result.message)})
    if result.status == "limit" and result.limit_hit in ("wall", "cpu"):
        # no report came back, so the device is not known: the verdict names none rather than "cpu"
        return Verdict(status="timeout", device="", **base, checks=_stopped(
            exercise, f"{_sentence(result.message or 'the program ran past its time limit')} "
                      f"{timeout_hint(code, result.stdout)}"))
    if result.status == "limit":
        return Verdict(status="failed", device="", **base, checks=_stopped(
            exercise, f"{_sentence(result.message or f'the program went past the {result.limit_hit} limit')} "
                      f"{timeout_hint(code, result.stdout, otherwise='')}".rstrip()))
    report = result.report
    if not isinstance(report, dict) or report.get("nonce") != nonce:
        if result.status == "failed" and result.signal == signal.SIGKILL:
            return Verdict(status="error", checks=[], **{**base, "stderr": _join(result.stderr, KILLED_MESSAGE)})
        why = ("the program ended before the grader could collect its results"
               + (f" (killed by signal {result.signal})" if result.signal else "")
               + "; do not call `os._exit()` or end the process yourself, and let the script run to its end.")
        return Verdict(status="failed", device="", **base, checks=_stopped(exercise, why))
    if report.get("probe_error"):
        return Verdict(status="error", device=report.get("device") or "cpu", checks=[],
                       **{**base, "stderr": _join(result.stderr, "The grader's probe failed (not your code's "
                                                                 "fault):\n" + report["probe_error"])})
    facts = Facts(report, code=code)
    checks = tidy(_decide(exercise, facts), code)
    status = "passed" if all(c.passed for c in checks) else "failed"
    placement, totals = placement_map(report, code)
    first = [e for e in placement if e.rank == placement[0].rank] if placement else []  # advice: one process's
    timeline = report.get("timeline") or None
    return Verdict(status=status, checks=checks, device=report.get("device") or "cpu", placement=placement,
                   placement_totals=totals, advice=sync_advice(first, facts.steps, timeline),
                   timeline=timeline, **base)


def _decide(exercise: Exercise, facts: Facts) -> list[CheckResult]:
    """Run checks.py and order its results like exercise.yaml; a check it forgot is a grader bug."""
    decided = {c.id: c for c in checks_module(exercise).evaluate(facts)}
    missing = [c.id for c in exercise.spec.checks if c.id not in decided]
    if missing:
        raise RuntimeError(f"{exercise.checks_path}: evaluate() decided no result for {missing}")
    return mark_unreached([decided[c.id] for c in exercise.spec.checks], facts)


def _sentence(text: str) -> str:
    """A limit's message as a sentence: capitalised, with its full stop."""
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!")) else ".")


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


@dataclass
class Grading:
    """One submission made ready for the sandbox: the job its caller submits, and what judging its result needs.

    Grading builds the job and evaluates its result; submitting is the caller's (the live hub, the worker, a
    regrade, the CLI), each with its own way to wait for room on the queue and to follow the job.
    """

    exercise: Exercise
    code: str
    job: Job
    nonce: str  # the key the harness's report must echo (app/harness/channel.py)
    machine: str | None = None  # the "Run on" choice asked for; None: the exercise's own machine
    started: float = field(default_factory=time.perf_counter)
    source: Source | None = None  # the code's tree, read ahead (`read_source`); None: read when judged

    def read_source(self) -> None:
        """Parse the code now, for the verdict, and make what its readings make of the tree (the placement map's
        loops, assignments and moves, the checks' unreachable lines: ~25 us for training-loop's solution, warm):
        call it while the job runs, away from the thread that will judge."""
        self.source = read_ahead(self.code)
        with holding(self.source):
            for reading in (loop_lines, assigned_names, moved_names, unreachable_after):
                reading(self.code)

    def verdict(self, result: Result) -> Verdict:
        """The verdict on the job's result, as a learner may read it (no server paths)."""
        with holding(self.source):
            verdict = evaluate(self.exercise, result, self.nonce, self.code)
        verdict.machine, verdict.devices = machine_words(self.job.host, self.machine)
        describe_timeline(verdict.timeline, verdict.machine)
        if not verdict.duration_ms:
            verdict.duration_ms = round((time.perf_counter() - self.started) * 1000)
        return for_learner(verdict)


def for_learner(verdict: Verdict) -> Verdict:
    """The verdict as a learner may read it (paths.verdict_for_learner: stdout, stderr and check messages scrubbed),
    made on the verdict itself: a fresh one made from its dump (model_dump, then model_validate of the scrubbed dict)
    cost ~0.06 ms warm and ~0.15 in a runner between jobs, for the same fields; the checks' fields that no dump
    carries (`cause`, `vacuous`, for check_messages.tidy only) are put back to their defaults, as that copy had
    them."""
    _set(verdict, "stdout", scrub(verdict.stdout or ""))
    _set(verdict, "stderr", scrub(verdict.stderr or ""))
    for c in verdict.checks:
        _set(c, "message", scrub(c.message or ""))
        _set(c, "cause", None)
        _set(c, "vacuous", False)
    return verdict


def _set(model, name: str, value) -> None:
    """model.name = value where it differs (pydantic's __setattr__ is ~1 us a field; most of these are unchanged)."""
    if getattr(model, name) != value:
        setattr(model, name, value)


def prepare(exercise: Exercise, code: str, *, limits=None, machine: str | None = None) -> Grading:
    """Build the sandbox job for a submission; `limits` are the runner's, which the exercise may tighten;
    `machine` the "Run on" choice (None: the exercise's own machine)."""
    job, nonce = build_job(exercise, code, limits=exercise_limits(exercise, limits), machine=machine)
    return Grading(exercise=exercise, code=code, job=job, nonce=nonce, machine=machine)


def machine_words(host, choice_id: str | None = None) -> tuple[str, list[dict]]:
    """The machine a job ran on in words (the choice's label, "One H100", else the profile's title) and its devices,
    each {"device", "name"}, for the verdict, the output's header and the placement map's legend."""
    choice = machine_choices.BY_ID.get(choice_id or "")
    if host is None:
        return (choice.label if choice else "the server's CPU"), [{"device": "cpu", "name": "the server's CPU"}]
    from app.harness.machine.machines import get

    try:
        title = get(host.machine, get_settings().sim_machines_dir).title
    except ValueError:
        title = host.machine
    label = choice.label if choice else title
    devices = [{"device": f"cuda:{i}", "name": host.gpu_name} for i in range(host.gpus)]
    if host.mps:
        devices.append({"device": "mps:0", "name": f"{host.gpu_name} GPU (MPS, unified memory)"})
    devices.append({"device": "cpu", "name": "the host's CPU and main memory"})
    return label, devices


def refused(exercise: Exercise, exc: Busy | Rejected) -> Verdict:
    """The verdict on a job the runner would not take: the queue was full (Busy) or the source was refused."""
    if isinstance(exc, Busy):
        return Verdict(exercise=exercise.slug, status="rejected",
                       stderr=f"The course is busy; retry in {exc.retry_after} s.")
    return Verdict(exercise=exercise.slug, status="rejected", stderr=exc.message)


async def follow(handle: JobHandle, on_output: OnOutput | None = None) -> Result:
    """Pass a submitted job's output lines (server paths scrubbed) to on_output as they come; return its result."""
    async for event in handle.events():
        if isinstance(event, OutputEvent) and on_output is not None:
            await emit(on_output, OutputEvent(event.stream, scrub(event.line)))
    return await handle.result()


async def grade_submission(exercise: Exercise, code: str, runner: Runner,
                           on_output: OnOutput | None = None) -> Verdict:  # fmt: skip
    """Grade one submission on a runner and return its verdict; on_output gets each OutputEvent (a line) as it
    comes. For callers that only wait for the verdict (`course grade`, `course check`); a full queue or refused
    source is a "rejected" verdict."""
    grading = prepare(exercise, code, limits=runner.limits)
    try:
        handle = await runner.submit(grading.job)
    except (Busy, Rejected) as exc:
        return refused(exercise, exc)
    # parsed while the job runs, the verdict then only reads it; after the runner's task has written the job (it
    # runs at this yield: submit() only starts it)
    await asyncio.sleep(0)
    grading.read_source()
    return grading.verdict(await follow(handle, on_output))
