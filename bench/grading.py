"""Grading overhead: `course grade training-loop solution.py` on a warm sandbox, against the same file run plainly.

Both sides use one warm LocalRunner (fork server up, pool refilled between runs, as between a learner's clicks):
- plain: the solution as a `run` job on the plain CPU (PLAIN_CPU: no tracer, no simulated GPU), end to end;
- graded: `grade_submission` of the solution (simulated GPU, tracer, probe, report, checks), end to end;
the overhead is graded minus plain, p50 over RUNS runs each. Also measured: the same `run` job on the default
simulated host (what `course run` does since issue 12), to show what the simulation alone costs; what seeing every
torch call costs at all, the floor of any tracer built on a TorchFunctionMode: the plain run job with the solution
under a mode that only hands each call on (`hand_on_job`, in the same sandbox, in grade_over_plain's units), and in
this process with no sandbox, the solution executed warm, bare, under that mode, and under the same mode written in
C, and bare and under the mode in children forked from this process once it has run both (`interception_floor`).
Writes bench/results/grading.json.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import statistics
import subprocess
import sysconfig
import tempfile
import time
import traceback
import types
from pathlib import Path

from app.content.exercises import load_exercise
from app.core.config import ROOT, Settings
from app.grading import grade_submission
from app.harness.contract import PLAIN_CPU
from app.runner import BlockingRunner, Job

RESULTS = Path(__file__).parent / "results"
RUNS = 30  # per side, as issue 5 asks
WARMUP = 3
PAUSE_S = 0.05  # between runs: the pool refills, as it does between a learner's clicks


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _timed(call, runs: int) -> list[float]:
    times = []
    for i in range(WARMUP + runs):
        time.sleep(PAUSE_S)
        started = time.perf_counter()
        call()
        if i >= WARMUP:
            times.append((time.perf_counter() - started) * 1000)
    return times


def hand_on_job(code: str) -> str:
    """A job's file that runs `code` as its __main__ under a TorchFunctionMode that only hands each call on: the
    plain run job with the least a tracer built on a mode adds (the program compiled a second time, from this file's
    string: ~0.1 ms of training-loop's)."""
    return f'''from torch.overrides import TorchFunctionMode as _Mode


class _HandOn(_Mode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {{}}))


with _HandOn():
    exec(compile({code!r}, "main.py", "exec"), {{"__name__": "__main__"}})
'''


# the hand-on mode's __torch_function__ in C, CPython's API alone: the floor once no Python frame runs per call
# (what is left is torch's own work: parsing the call's arguments, handing them to the mode, parsing them again)
_C_HAND_ON = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* hand_on(mode, func, types, args=(), kwargs=None) -> func(*args, **kwargs) */
static PyObject *hand_on(PyObject *module, PyObject *const *a, Py_ssize_t n) {
    if (n < 3) { PyErr_SetString(PyExc_TypeError, "hand_on(mode, func, types, args, kwargs)"); return NULL; }
    PyObject *kwargs = n > 4 && a[4] != Py_None ? a[4] : NULL;
    if (n > 3) return PyObject_Call(a[1], a[3], kwargs);
    PyObject *none = PyTuple_New(0), *out = none ? PyObject_Call(a[1], none, kwargs) : NULL;
    Py_XDECREF(none);
    return out;
}
static PyMethodDef methods[] = {{"hand_on", (PyCFunction)(void (*)(void))hand_on, METH_FASTCALL, ""}, {0}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "bench_hand_on", 0, -1, methods};
PyMODINIT_FUNC PyInit_bench_hand_on(void) { return PyModule_Create(&module); }
"""


def c_hand_on(folder: Path):
    """_C_HAND_ON built with the C compiler this Python was built with, loaded; None where there is no compiler."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    if not cc or shutil.which(cc[0]) is None:
        return None
    source = folder / "bench_hand_on.c"
    source.write_text(_C_HAND_ON)
    built = folder / f"bench_hand_on{sysconfig.get_config_var('EXT_SUFFIX')}"
    made = subprocess.run([*cc, "-O2", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source),
                           "-o", str(built)], capture_output=True)
    if made.returncode != 0:
        return None
    spec = importlib.util.spec_from_file_location("bench_hand_on", built)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.hand_on


def _in_child(measure) -> float:
    """measure() in a forked child of this process; its result (a float) comes back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, repr(measure()).encode())
        except Exception:  # noqa: BLE001 - the child says why on stderr; the parent then has no figure
            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write)
    try:
        figure = os.read(read, 64)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    if not figure:
        raise RuntimeError("a forked measurement ended without a figure (its traceback is above)")
    return float(figure)


def interception_floor(code: str, runs: int) -> dict:
    """What a TorchFunctionMode that does nothing but hand each call on adds to the program, in this process (warm,
    output discarded, CPU time of this thread): the least any tracer that sees every torch call can cost; the same
    mode with its __torch_function__ in C (None where there is no C compiler); and the program bare and under the
    mode in children forked from this process (_floor)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class HandOn(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            HandOn.calls += 1
            return func(*args, **(kwargs or {}))

    with tempfile.TemporaryDirectory() as folder:
        in_c = c_hand_on(Path(folder))

    def c_mode():
        mode = TorchFunctionMode()
        # bound to the mode as a method: torch refuses a __torch_function__ that is not one (it takes any other
        # callable for a classmethod)
        mode.__torch_function__ = types.MethodType(in_c, mode)
        return mode

    compiled = compile(code, "main.py", "exec")
    # one thread, as every job runs (OMP_NUM_THREADS=1): and a child forked after a multi-threaded OpenMP region
    # hangs in its first matmul (app/sandbox/startup.py)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _floor(compiled, runs, HandOn, c_mode if in_c is not None else None)
    finally:
        torch.set_num_threads(threads)


def _floor(compiled, runs: int, HandOn, c_mode) -> dict:
    """interception_floor's runs: bare, under HandOn, under c_mode() (None: not measured), and bare and under
    HandOn in forked children."""

    def once(mode) -> float:
        with contextlib.redirect_stdout(io.StringIO()), (mode or contextlib.nullcontext()):
            started = time.thread_time()
            exec(compiled, {"__name__": "__main__"})
            return (time.thread_time() - started) * 1000

    plain, handed, in_c_handed = [], [], []
    for i in range(WARMUP + runs):  # alternated, so a slower stretch of the machine falls on all of them
        p, h = once(None), once(HandOn())
        c = once(c_mode()) if c_mode is not None else None
        if i >= WARMUP:
            plain.append(p)
            handed.append(h)
            if c is not None:
                in_c_handed.append(c)
    calls = HandOn.calls // (WARMUP + runs)  # the same program each run: the same calls
    # ... and each run in a child forked from this process, which has run the program bare and under the mode by
    # now: a job's child is a fork too, and a fork runs the same code slower than the warm process it came from (its
    # pages and caches are cold), mode or no mode
    forked_plain, forked_handed = [], []
    for _ in range(runs):
        forked_plain.append(_in_child(lambda: once(None)))
        forked_handed.append(_in_child(lambda: once(HandOn())))
    return {"inprocess_plain_p50_ms": round(pct(plain, 50), 2),
            "inprocess_hand_on_mode_p50_ms": round(pct(handed, 50), 2),
            "inprocess_c_hand_on_mode_p50_ms": round(pct(in_c_handed, 50), 2) if in_c_handed else None,
            "forked_plain_p50_ms": round(pct(forked_plain, 50), 2),
            "forked_hand_on_mode_p50_ms": round(pct(forked_handed, 50), 2),
            "hand_on_mode_calls": calls,
            "hand_on_mode_us_per_call": round((pct(handed, 50) - pct(plain, 50)) * 1000 / max(calls, 1), 2)}


def run(runs: int = RUNS) -> dict:
    """Measure plain and graded runs of training-loop's solution; write bench/results/grading.json."""
    exercise = load_exercise(ROOT / "exercises" / "training-loop")
    settings = Settings(env="test", secret_key="bench", runner_queue_size=1000)
    statuses = set()
    with BlockingRunner(settings) as runner:
        plain = _timed(lambda: statuses.add(runner.run(Job(code=exercise.solution, filename="main.py",
                                                           host=PLAIN_CPU)).status), runs)
        handed_on = _timed(lambda: statuses.add(runner.run(Job(code=hand_on_job(exercise.solution), filename="main.py",
                                                               host=PLAIN_CPU)).status), runs)
        simulated = _timed(lambda: statuses.add(runner.run(Job(code=exercise.solution, filename="main.py")).status),
                           runs)

        def graded_once():
            verdict = runner.call(grade_submission(exercise, exercise.solution, runner.runner))
            statuses.add(verdict.status)

        graded = _timed(graded_once, runs)
    overhead = [g - p for g, p in zip(sorted(graded), sorted(plain))]
    figures = {
        "runs": runs,
        "plain_job_p50_ms": round(pct(plain, 50), 1), "plain_job_p95_ms": round(pct(plain, 95), 1),
        "hand_on_job_p50_ms": round(pct(handed_on, 50), 1),
        "simulated_run_job_p50_ms": round(pct(simulated, 50), 1),
        "grade_training_loop_p50_ms": round(pct(graded, 50), 1),
        "grade_training_loop_p95_ms": round(pct(graded, 95), 1),
        "grade_training_loop_mean_ms": round(statistics.fmean(graded), 1),
        "grading_overhead_p50_ms": round(pct(graded, 50) - pct(plain, 50), 1),
        "grading_overhead_p95_ms": round(pct(overhead, 95), 1),
        "statuses": sorted(statuses),
        **interception_floor(exercise.solution, runs),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grading.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Print the figures as a small table."""
    return "\n".join([
        f"  training-loop solution, {f['runs']} runs each, warm sandbox    p50 ms   p95 ms",
        f"  plain run job (no tracer)                               {f['plain_job_p50_ms']:>7}  "
        f"{f['plain_job_p95_ms']:>7}",
        f"  plain run job under a mode that only hands calls on     {f['hand_on_job_p50_ms']:>7}",
        f"  course grade (tracer + probe + checks)                  {f['grade_training_loop_p50_ms']:>7}  "
        f"{f['grade_training_loop_p95_ms']:>7}",
        f"  grading overhead                                        {f['grading_overhead_p50_ms']:>7}  "
        f"{f['grading_overhead_p95_ms']:>7}",
        f"  verdict statuses seen: {', '.join(f['statuses'])}",
        f"  in this process, warm: plain {f['inprocess_plain_p50_ms']} ms, under a mode that only hands each call on "
        f"{f['inprocess_hand_on_mode_p50_ms']} ms ({f['hand_on_mode_calls']} calls, "
        f"{f['hand_on_mode_us_per_call']} us each), the same mode in C {f['inprocess_c_hand_on_mode_p50_ms']} ms",
        f"  in children forked from this process: plain {f['forked_plain_p50_ms']} ms, under the mode "
        f"{f['forked_hand_on_mode_p50_ms']} ms",
    ])
