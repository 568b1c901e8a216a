"""Each job and each rank starts as `python main.py` would (app/harness/interpreter.py), through the real sandbox, not
with the fork server's interpreter state, which every job it forked would share: the script's own command line
(argparse works), its folder first on sys.path, and a random state of its own, so an unseeded program's numbers
differ from run to run as `python main.py`'s do, and a seeded one's stay the same."""

from __future__ import annotations

import hashlib
import json

from app.harness.contract import PLAIN_CPU
from app.runner import Job
from tests.sandbox.test_ranks import by_rank, run_ranks

# a training script's options, none given; the script's command line and path; a module it writes beside itself
SCRIPT = """\
import argparse, json, os, sys

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
with open("helper.py", "w") as f:
    f.write("ANSWER = 42\\n")
import helper

print(json.dumps({"epochs": args.epochs, "argv": sys.argv, "orig_argv": sys.orig_argv[1:],
                  "path0_is_cwd": sys.path[0] == os.getcwd(), "helper": helper.ANSWER}))
"""
# a class of the script's, found by its module: a whole model saved and loaded, pickled, its source read
WHOLE_MODEL = """\
import inspect, io, pickle, sys
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)


buf = io.BytesIO()
torch.save(Net().to("cuda"), buf)
buf.seek(0)
model = torch.load(buf, weights_only=False)
print(type(model).__name__, model.fc.weight.device, type(pickle.loads(pickle.dumps(Net()))).__name__)
print(sys.modules["__main__"].__dict__ is globals(), type(__builtins__).__name__, __spec__, __package__)
print(inspect.getsource(Net).splitlines()[0])
"""
# the script's own file, beside it; a process started with spawn imports it (as __mp_main__) to find `square`
SPAWNS = """\
import hashlib, multiprocessing, os


def square(x):
    return x * x


if __name__ == "__main__":
    print(hashlib.sha256(open(__file__, "rb").read()).hexdigest(), "main.py" in os.listdir("."))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print(pool.map(square, [1, 2, 3]))
"""
# warnings torch gives from C++ (at the caller's line) and from Python (at its caller's, in torch's own file), at two
# lines and in a loop (shown once per place), and the learner's own with a stacklevel past the stack
WARNS = """\
import warnings
import numpy as np
import torch
from torch import nn

nn.MSELoss()(torch.zeros(4, 1), torch.zeros(4))
torch.tensor(torch.ones(2))
a = np.ones(3)
a.setflags(write=False)
torch.from_numpy(a)
x = torch.ones(2, requires_grad=True)
y = x * 2
y.grad
for _ in range(3):
    torch.tensor(torch.ones(2))
warnings.warn("top", stacklevel=2)
"""
# the program's end: a non-daemon thread still working, an executor left open, atexit callbacks (one raises), a
# finalizer of its own (torch's import registered weakref.finalize's exit callback first: it runs last)
ENDS = """\
import atexit, threading, time, weakref
from concurrent.futures import ThreadPoolExecutor


class Kept:
    pass


kept = Kept()
weakref.finalize(kept, print, "finalizer: at exit, after the callbacks")
atexit.register(print, "atexit: registered first, runs last")
atexit.register(lambda: 1 / 0)
atexit.register(print, "atexit: registered last, runs first")
ThreadPoolExecutor(1).submit(time.sleep, 0.05)  # never shut down: the interpreter's exit stops its worker


def late():
    time.sleep(0.3)
    print("thread finished")


threading.Thread(target=late).start()
print("main done")
"""
# what a program draws without seeding anything: torch's CPU seed and values, NumPy's and Python's
UNSEEDED = """\
import json, random
import numpy
import torch

print(json.dumps({"seed": torch.initial_seed(), "torch": torch.rand(4).tolist(), "numpy": numpy.random.rand(4).tolist(),
                  "python": random.random()}))
"""
SEEDED = """\
import numpy
import torch

torch.manual_seed(0)
numpy.random.seed(0)
print(torch.rand(4).tolist(), numpy.random.rand(4).tolist())
"""
# torch's CUDA generators are seeded with default_rng_seed_val in a new process (ATen/cuda/CUDAGeneratorImpl.h)
CUDA_DEFAULT_SEED = 67280421310721
ON_THE_GPU = """\
import torch

print(torch.cuda.initial_seed(), torch.rand(4, device="cuda").tolist())
"""


def _drawn(sandbox, code: str, **job) -> str:
    result = sandbox.run(Job(code=code, filename="main.py", **job))
    assert (result.status, result.exit_code) == ("ok", 0), result.stderr
    return result.stdout


def test_a_job_sees_its_own_command_line_not_the_servers(sandbox):
    expected = {"epochs": 3, "argv": ["main.py"], "orig_argv": ["main.py"], "path0_is_cwd": True, "helper": 42}
    for host in ({}, {"host": PLAIN_CPU}):
        assert json.loads(_drawn(sandbox, SCRIPT, **host)) == expected
    graded = sandbox.run(Job(code=SCRIPT, filename="main.py", mode="grade", grade={"exercise": "t", "probe": None}))
    assert graded.status == "ok" and json.loads(graded.stdout) == expected, graded


def test_the_scripts_classes_are_found_in_its_own_main_module(sandbox):
    expected = ["Net cuda:0 Net", "True module None None", "class Net(nn.Module):"]
    assert _drawn(sandbox, WHOLE_MODEL).splitlines() == expected
    graded = sandbox.run(Job(code=WHOLE_MODEL, filename="main.py", mode="grade",
                             grade={"exercise": "t", "probe": None}))
    assert graded.status == "ok" and graded.stdout.splitlines() == expected, graded


def test_the_scripts_file_is_in_its_folder_and_a_spawned_process_imports_it(sandbox):
    digest = hashlib.sha256(SPAWNS.encode()).hexdigest()
    # (the folder may hold more: a project checked out under /tmp has the venv's mount point there)
    assert _drawn(sandbox, SPAWNS).splitlines() == [f"{digest} True", "[1, 4, 9]"]


def test_a_warning_names_the_line_python_names_not_the_harnesss(sandbox):
    """The plain CPU's run has no simulation between the program and torch: its warnings are Python's own."""
    shown = {}
    for name, host in (("simulated", {}), ("plain", {"host": PLAIN_CPU})):
        result = sandbox.run(Job(code=WARNS, filename="main.py", **host))
        assert result.status == "ok", result
        shown[name] = result.stderr.splitlines()
    assert shown["simulated"] == shown["plain"]
    places = [line.split(": ")[0].rsplit("/", 1)[-1] for line in shown["plain"] if "Warning: " in line]
    assert places[0].startswith("loss.py:")  # torch's own file: F.mse_loss warns at its caller's line
    assert places[1:] == ["main.py:7", "main.py:10", "main.py:13", "main.py:15", "sys:1"], places
    assert not any("harness" in line for line in shown["simulated"])


def test_a_job_ends_as_an_interpreter_does(sandbox):
    """Its threads are waited for, then its atexit callbacks run, last first; not the fork server's."""
    expected = ["main done", "thread finished", "atexit: registered last, runs first",
                "atexit: registered first, runs last", "finalizer: at exit, after the callbacks"]
    for mode in ({}, {"mode": "grade", "grade": {"exercise": "t", "probe": None}}):
        result = sandbox.run(Job(code=ENDS, filename="main.py", **mode))
        assert result.status == "ok" and result.stdout.splitlines() == expected, result
        assert "Exception ignored in atexit callback" in result.stderr and "ZeroDivisionError" in result.stderr
    r = run_ranks(sandbox, ENDS)
    assert (r.status, r.exit_code) == ("ok", 0), r.stderr
    assert {rank: lines for rank, lines in by_rank(r.stdout).items()} == {0: expected, 1: expected}


def test_unseeded_jobs_of_one_server_draw_different_numbers(sandbox):
    for host in ({}, {"host": PLAIN_CPU}):  # the simulated GPU's host and the plain CPU's
        runs = [json.loads(_drawn(sandbox, UNSEEDED, **host)) for _ in range(3)]
        for key in ("seed", "torch", "numpy", "python"):
            values = [json.dumps(run[key]) for run in runs]
            assert len(set(values)) == 3, (key, values)


def test_a_seeded_job_draws_the_same_numbers_every_run(sandbox):
    assert len({_drawn(sandbox, SEEDED) for _ in range(3)}) == 1


def test_the_simulated_gpus_generator_keeps_cudas_fixed_default_seed(sandbox):
    runs = {_drawn(sandbox, ON_THE_GPU) for _ in range(2)}
    assert len(runs) == 1, runs  # unseeded GPU values repeat, as on a real card
    assert runs.pop().split()[0] == str(CUDA_DEFAULT_SEED)


def test_each_rank_sees_the_scripts_command_line(sandbox):
    r = run_ranks(sandbox, SCRIPT)
    assert (r.status, r.exit_code) == ("ok", 0), r.stderr
    lines = by_rank(r.stdout)
    assert sorted(lines) == [0, 1]
    for rank_lines in lines.values():
        seen = json.loads(rank_lines[0])
        assert (seen["epochs"], seen["argv"], seen["orig_argv"]) == (3, ["ranks.py"], ["ranks.py"]), seen


def test_each_rank_draws_a_seed_of_its_own(sandbox):
    r = run_ranks(sandbox, "import torch\nprint(torch.initial_seed())\n")
    assert (r.status, r.exit_code) == ("ok", 0), r.stderr
    seeds = {rank: lines[0] for rank, lines in by_rank(r.stdout).items()}
    assert sorted(seeds) == [0, 1] and seeds[0] != seeds[1], seeds


# a process left running at the script's end (joined, as an interpreter's multiprocessing does), and a daemonic one
# (stopped); waits with a timeout on multiprocessing's selectors, timed on the program's clock
LEFT_RUNNING = """\
import multiprocessing as mp
import time


def work():
    time.sleep(0.3)
    print("child finished its work", flush=True)


if __name__ == "__main__":
    mp.Process(target=time.sleep, args=(3600,), daemon=True).start()
    mp.Process(target=work).start()
    print("parent done", flush=True)
"""
TIMED_WAITS = """\
import asyncio
import multiprocessing as mp
import queue
import time

started = time.monotonic()
try:
    mp.Queue().get(timeout=0.3)
except queue.Empty:
    print("queue empty after", round(time.monotonic() - started, 1))
sleeper = mp.Process(target=time.sleep, args=(3600,), daemon=True)
sleeper.start()
started = time.monotonic()
sleeper.join(timeout=0.2)
print("join gave up after", round(time.monotonic() - started, 1), "alive", sleeper.is_alive())
started = time.monotonic()
asyncio.run(asyncio.sleep(0.2))
print("asyncio slept", round(time.monotonic() - started, 1))
"""


def test_a_process_the_program_left_running_is_joined_at_its_end(sandbox):
    """As `python main.py` does (multiprocessing's exit callback): the child's last line is not lost, and the
    daemonic one is stopped rather than waited for (the job ends long before the wall limit)."""
    for job in ({}, {"host": PLAIN_CPU}, {"mode": "grade", "grade": {"exercise": "t", "probe": None}}):
        result = sandbox.run(Job(code=LEFT_RUNNING, filename="main.py", **job))
        assert result.status == "ok", result
        assert result.stdout.splitlines() == ["parent done", "child finished its work"], result
        assert result.duration_ms < 5000, result


def test_a_wait_with_a_timeout_ends_on_the_simulated_clock_as_on_a_real_host(sandbox):
    """multiprocessing's timed waits select until time.monotonic() passes their deadline: on the simulated host's
    clock, which a wait in a selector moves on (clock.install_waits), they give up as on the plain CPU; asyncio's
    timers read that clock too. Before, each one waited until the wall limit."""
    expected = ["queue empty after 0.3", "join gave up after 0.2 alive True", "asyncio slept 0.2"]
    for host in ({}, {"host": PLAIN_CPU}):
        assert _drawn(sandbox, TIMED_WAITS, **host).splitlines() == expected
