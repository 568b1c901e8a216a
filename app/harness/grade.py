"""Grading mode: run the learner's file under the placement tracer, run the exercise's probe, report the facts.

The report is ONE JSON document written to report_fd after the learner's code and the probe have finished. The
grader outside the sandbox turns it into a verdict; nothing here decides pass or fail. The report echoes the
job's key, which the harness asks the fork server for only after the learner's code and the probe have finished
(channel.py), so the key is nowhere in this process while the learner's code runs: bytes that code writes to
the pipe on its own do not read as a report (they are not JSON once the real report follows, or they lack the
key), and if it asks for the key itself, the server gives it no second time and discards the report.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch

from app.harness import interpreter, session, stdio
from app.harness.contract import GradeSpec, JobPayload, Report
from app.harness.elsewhere import Elsewhere, drop_spare
from app.harness.machine.builds import Availability
from app.harness.machine.clock import CLOCK, REAL_PERF
from app.harness.tracing import placement

# events of the modeled timeline a report carries (the page draws them, GET /api/submissions/{id}/trace serves them
# as a Chrome trace): a 60-step training loop makes about 1,500; at about 40 bytes each the verdict grows by 120 KB
# at most. `course run --trace` keeps up to clock.TRACE_EVENTS_KEPT.
VERDICT_EVENTS = 3000

_TRACER_PLUMBING = (os.path.join("torch", "overrides.py"),)
# bytes; the fork server drops reports past 4 MiB, so stay well under it
REPORT_BUDGET = 3 << 20
# The learner's module namespaces, kept alive until the process ends (os._exit: no finalisers). Freed earlier,
# they would destroy the learner's objects while the harness still works, and some destructors block: gloo's
# process group, still held by a DDP model after destroy_process_group(), waits on peers that have already left.
KEPT_NAMESPACES: list[dict] = []


def describe_exception(exc: BaseException, filename: str) -> dict:
    """The learner-facing facts of an exception: type, message, learner lines, a traceback without our frames."""
    frames = [fs for fs in traceback.extract_tb(exc.__traceback__)]
    lines = [fs.lineno for fs in frames if fs.filename == filename]
    if isinstance(exc, SyntaxError) and exc.filename == filename and exc.lineno:
        lines.append(exc.lineno)  # compile() failed: no frame of the learner's file ran
    # a SyntaxError's str() repeats the file and line ("expected ':' (main.py, line 3)"); the line is in `line`
    message = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    return {"type": type(exc).__name__, "message": message, "lines": lines,
            "line": lines[-1] if lines else None, "traceback": format_learner_traceback(exc, filename)}


def exit_line(exc: SystemExit, filename: str) -> int | None:
    """The learner's line that called sys.exit()."""
    lines = [fs.lineno for fs in traceback.extract_tb(exc.__traceback__) if fs.filename == filename]
    return lines[-1] if lines else None


def format_learner_traceback(exc: BaseException, filename: str) -> str:
    """Format exc like Python would, starting at the learner's file and without the harness's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    # the harness's frames, and torch's torch-function plumbing that only exists because the tracer is on
    summary = traceback.StackSummary.from_list(
        [fs for fs in traceback.extract_tb(tb) if not fs.filename.startswith(placement.HARNESS_DIR)
         and not fs.filename.endswith(_TRACER_PLUMBING)])
    head = "Traceback (most recent call last):\n" if summary else ""
    body = "".join(summary.format())
    tail = "".join(traceback.format_exception_only(type(exc), exc))
    return head + body + tail


class ProbeAPI:
    """What an exercise's probe may use to question the learner's code (see exercises/*/probe.py)."""

    def __init__(self, tracer: placement.Tracer, avail: Availability, filename: str):
        self.tracer, self.availability, self.filename = tracer, avail, filename
        self.accelerator = tracer.accelerator
        self.simulated = tracer.simulated
        self.host = avail.devices.host
        self.return_line: int | None = None  # set by call()

    def device_of(self, t: torch.Tensor) -> str:
        """Where t lives, as the learner's code sees it (e.g. "cuda:0")."""
        return self.tracer.device_of(t)

    def on_accelerator(self, t: torch.Tensor) -> bool:
        """True when t lives on the accelerator."""
        return self.tracer.on_accelerator(t)

    def scenario(self, *, build: str = "cuda", gpus: int = 1, mps: bool = False):
        """Context manager: pretend to be another torch build (a build profile's id: "cuda", "macos-arm64", "cpu")
        with other devices (CUDA GPUs only where the build has CUDA)."""
        return self.availability.scenario(self.host.on_build(build, gpus=gpus, mps=mps))

    def host_copy(self, t: torch.Tensor) -> torch.Tensor:
        """A detached host copy of t for comparing values (never recorded as the learner's move)."""
        with torch._C.DisableTorchFunction():
            return t.detach().to("cpu").clone()

    def on_device(self, t: torch.Tensor, device: str | None = None) -> torch.Tensor:
        """Put a probe-made tensor on the accelerator (a label when simulated)."""
        device = device or self.accelerator
        if self.simulated:
            t._pt_dev = device
            return t
        with torch._C.DisableTorchFunction():
            return t.to(device)

    def mark(self) -> dict:
        """Event counts now, to ask later which events a call added."""
        return {k: len(v) for k, v in self.tracer.events.items()}

    def events_since(self, mark: dict, kind: str) -> list[dict]:
        """Events of kind recorded after mark."""
        return self.tracer.events.get(kind, [])[mark.get(kind, 0):]

    def call(self, fn, *args, **kwargs):
        """Call a learner function; return (result, error facts or None). `return_line` is then the learner's
        line that returned the result (the `return` to blame for a wrong value), or None."""
        self.return_line = None
        code = getattr(fn, "__code__", None)

        def watch(frame, event, _arg):
            if event == "return" and frame.f_code is code:
                self.return_line = frame.f_lineno
        previous = sys.getprofile()
        sys.setprofile(watch if code is not None else previous)
        try:
            return fn(*args, **kwargs), None
        except Exception as exc:  # the learner's bug is a fact to report, not a grader crash
            self.return_line = None
            return None, describe_exception(exc, self.filename)
        finally:
            sys.setprofile(previous)


def _run_learner(code: str, filename: str, namespace: dict, show_traceback) -> dict:
    """Execute the learner's file as __main__; return how it ended."""
    start = REAL_PERF()  # the real duration (the program's clocks may read modeled time)
    outcome: dict = {"finished": True, "exit_code": 0, "exception": None}
    try:
        exec(compile(code, filename, "exec"), namespace)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        outcome.update(system_exit=True, exit_code=status, exit_line=exit_line(exc, filename))
    except BaseException as exc:  # the learner's error: a fact for the report, and a traceback like Python's
        outcome.update(finished=False, exit_code=1, exception=describe_exception(exc, filename))
        show_traceback(outcome["exception"]["traceback"])
    interpreter.finish()  # its threads, then its atexit callbacks: the program's end, before the probe looks
    outcome["duration_ms"] = round((REAL_PERF() - start) * 1000, 1)
    return outcome


# the course's probes, compiled by the fork server before its first fork (keep_probes): probe source -> code object.
# Every graded job compiled its exercise's probe (thread_time, p50: training-loop's 63 us, bring-it-back's 206,
# model-internals' 14.7 KB 1.93 ms); a job is a fork of that server and finds it here. Only the course's own files
# go in, never a job's data; a source not here (another content folder, a probe edited since the server started) is
# compiled in the job as before.
PROBES: dict[str, object] = {}


def keep_probes(folder) -> None:
    """Compile every `*/probe.py` under the exercises' folder into PROBES (the fork server, before forking)."""
    for path in sorted(Path(folder).glob("*/probe.py")):
        try:
            source = path.read_text(encoding="utf-8")  # as the content loader reads it: the job's probe text
            PROBES[source] = compile(source, "<probe>", "exec")
        except (OSError, ValueError, SyntaxError):  # the job compiles it and reports its error, as before
            continue


def _run_probe(source: str, namespace: dict, api: ProbeAPI) -> tuple[dict | None, str | None]:
    probe_ns: dict = {"__name__": "__probe__"}
    try:
        code = PROBES.get(source)
        exec(compile(source, "<probe>", "exec") if code is None else code, probe_ns)
        return probe_ns["probe"](namespace, api), None
    except Exception:  # the probe is the course's code: its failure is a grader error, not the learner's
        return None, traceback.format_exc(limit=-6)


@contextmanager
def _quiet_stdout_errors():
    try:
        yield
    except (BrokenPipeError, OSError):
        pass


# json.dumps(value, default=str) without its check for reference cycles, which keeps a dict of every list and dict
# it enters (~500 in training-loop's report): 0.07 ms of the graded job's 0.65 ms encoding, forked children
_ENCODER = json.JSONEncoder(default=str, check_circular=False)


def _dumps(value) -> bytes:
    """json.dumps(value, default=str) as bytes: the same text, or the same error."""
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except RecursionError:  # a cycle (a probe's value), or nesting too deep for both: as json.dumps says it
        return json.dumps(value, default=str).encode("utf-8")


def encode_report(report: Report, budget: int = REPORT_BUDGET) -> bytes:
    """The report as JSON, within budget bytes: past it the bulky detail goes, the verdict-relevant summary stays."""
    data = _dumps(report)
    if len(data) > budget:
        report["trace"]["events"] = {k: v[:20] for k, v in report["trace"]["events"].items()}
        report["trace"]["losses"] = report["trace"]["losses"][:200]
        data = _dumps(report)
    return data


def with_nonce(key: str, body: bytes) -> bytes:
    """The report encoded without its key (encode_report), with the key put first: the bytes
    encode_report({"nonce": key, **report}) gives."""
    return b'{"nonce": ' + json.dumps(key).encode() + (b", " + body[1:] if body != b"{}" else b"}")


def write_json(report_fd: int, value: dict) -> None:
    """Write one JSON document to the report pipe and close it."""
    write_bytes(report_fd, json.dumps(value, default=str).encode("utf-8"))


def write_bytes(report_fd: int, data: bytes) -> None:
    view = memoryview(data)
    with _quiet_stdout_errors():
        while view:
            view = view[os.write(report_fd, view):]
        os.close(report_fd)


# copies of the warm-up's facts and drawn events warm_report encodes: about the size of training-loop's report
# (51 KB; the warm-up's one step makes ~1.3 KB of facts and ~20 drawn events)
WARM_REPORT_COPIES = 40
_WARM_REPORT: dict | None = None  # the warm-up's facts and drawing (keep_warm_report), for warm_report


def keep_warm_report(tracer: placement.Tracer) -> None:
    """What a graded job does after the learner's run, once through the warm-up's facts: its report and the
    timeline drawn (CLOCK.timeline), kept as a report of about a real one's size for warm_report."""
    global _WARM_REPORT
    trace, drawn = tracer.report(), CLOCK.timeline(VERDICT_EVENTS)
    trace["events"] = {kind: facts * WARM_REPORT_COPIES for kind, facts in trace["events"].items()}
    drawn["events"] = drawn.get("events", []) * WARM_REPORT_COPIES
    _WARM_REPORT = {"nonce": "", "trace": trace, "timeline": drawn}


def warm_report() -> None:
    """In a waiting child, last: encode the warm-up's report as a graded job encodes its own (encode_report).
    The job's first encoding cost ~0.4 ms more than a second one, Python's memory pools and their pages first
    written to there (training-loop: 0.83-0.88 ms in a forked job against 0.45-0.48 after an encoding of a report
    that size in its waiting child, thread_time, medians of 10-12); a small report's encoding did not help, nor one
    made before the session is built ahead (which takes the memory it freed)."""
    global _WARM_REPORT
    if _WARM_REPORT is not None:
        # a report's own objects, each made anew as a run makes its facts (the copies share theirs), then encoded
        report = json.loads(encode_report(_WARM_REPORT))
        _WARM_REPORT = None
        encode_report(report)


def run_grade(payload: JobPayload, report_fd: int | None, request_key) -> int:
    """Run the learner's file under the tracer, then the probe; ask for the key; write the report; return the
    exit code.

    The report is encoded while the fork server answers the key request (channel.request_key's meanwhile), the key
    then put in front of it (with_nonce): the graded job no longer waits for the server's answer before its last
    0.4-0.8 ms of work (training-loop's 51 KB report)."""
    grade = dict(payload.get("grade") or {})
    payload["grade"] = None  # the learner's code must not find the probe in the payload
    report, status = collect(payload, grade)
    body: list[bytes] = []
    key = request_key(None if report_fd is None else lambda: body.append(encode_report(report)))
    if report_fd is not None:
        write_bytes(report_fd, with_nonce(key, body[0]))
    return status


def collect(payload: JobPayload, grade: GradeSpec, show_traceback=None) -> tuple[Report, int]:
    """Run the learner's file under the tracer, then the probe; return (the facts, the exit code).

    show_traceback(text) shows the learner's traceback (default: on stderr; a rank hands it to its launcher)."""
    filename = payload.get("filename") or "main.py"
    code = payload["code"]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    originals = {"Tensor.to": torch.Tensor.to, "Module.to": None}
    job = session.prepare(payload, filename, grading=True)
    tracer, avail = job.tracer, job.availability
    originals["Module.to"] = torch.nn.Module.to
    namespace = interpreter.main_module(filename)
    KEPT_NAMESPACES.append(namespace)
    elsewhere = Elsewhere()
    if grade.get("elsewhere") and not job.real_cuda:  # a real GPU cannot be hidden from the program
        # the spare was forked before this job came: its copy starts from this run's random state too
        spare_job = {"code": code, "filename": filename, "host": payload.get("host"),
                     "seed": torch.default_generator.initial_seed()}
        elsewhere.start(grade["elsewhere"], lambda host: _run_elsewhere(job, code, filename, host), spare_job)
    else:
        drop_spare()
    outcome = _run_learner(code, filename, namespace, show_traceback or sys.stderr.write)
    # the learner's run, not the probe's: its figures, and its first events for the page to draw
    timeline = CLOCK.timeline(VERDICT_EVENTS) if job.simulated and CLOCK.active else None
    probe, probe_error = (None, None)
    if grade.get("probe"):
        probe, probe_error = _run_probe(grade["probe"], namespace, ProbeAPI(tracer, avail, filename))
    tracer.uninstall()
    stdio.flush_streams()
    tampered = avail.tampered() + [name for name, fn in originals.items()
                                   if fn is not None and fn is not _current(name)]
    # the parameters' digest is for ranks to compare (ddp-training's checks): one process has none to compare it
    # with, and it copied every trained parameter's bytes (training-loop: 0.2 ms of the job's CPU after its run)
    dist = job.distributed.final(digest=bool(payload.get("rank")))
    report: Report = {"exercise": grade.get("exercise"), "simulated": job.simulated, "device": job.device_line(),
              "accelerator": tracer.accelerator, "host": payload.get("host"), "outcome": outcome, "probe": probe,
              "probe_error": probe_error, "tampered": tampered, "trace": tracer.report(),
              "dist": dist, "elsewhere": elsewhere.collect(), "timeline": timeline}
    return report, int(outcome["exit_code"]) if isinstance(outcome["exit_code"], int) else 1


def _run_elsewhere(job: session.Session, code: str, filename: str, host) -> dict:
    """In a copy (a forked child, or the spare): run the learner's file on `host`; return how it ended. Only that
    comes back, so the hooks that gather facts go."""
    tracer, avail = job.tracer, job.availability
    tracer.stop_observing(batches=not host.simulated)
    if not host.simulated:  # a CPU-only build: torch itself answers every device question, untraced
        tracer.uninstall()
    if host.mps and tracer.mps is not None:  # a Mac reads PYTORCH_ENABLE_MPS_FALLBACK at `import torch`
        tracer.mps.fallback = None
        tracer.mps.watch_import(filename)
    avail.become(host)  # for good: the copy ends with this run
    other = interpreter.main_module(filename)
    return _run_learner(code, filename, other, lambda text: None)


def serve_spare(command: dict, host) -> dict:
    """In the spare (elsewhere.fork_spare): take the program as the graded run did (its file's lines, the session
    built ahead) and run it on `host`. What the job process sets up at its hand-over (app/sandbox/child.py) and a
    forked copy would inherit is set up here too: no bytecode written, stdin read as text, the script's command line
    and the graded run's random seed (interpreter.py)."""
    sys.dont_write_bytecode = True
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
    filename, code = command["filename"], command["code"]
    interpreter.start(filename, seed=command.get("seed"))  # its file is there: the job wrote it
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    job = session.prepare({"host": command["host"], "nproc": 1}, filename, grading=True)
    return _run_elsewhere(job, code, filename, host)


def _current(name: str):
    return {"Tensor.to": torch.Tensor.to, "Module.to": torch.nn.Module.to}[name]
