"""Waiting children that build the default machine's simulated host before their job comes (session.ahead), after
running the warm-up's training loop once more (startup.warm_pages).

The pool's choice in small parts (a stand-in server that records the children it is asked for), then through the
front door: jobs on the default machine and on others, in a real sandbox whose waiting child built it ahead, end
exactly as in one whose children build nothing, and the program's clocks start when its job does.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from app.harness.contract import DEFAULT_HOST, fits_ahead, host_for, machine_host
from app.runner import BlockingRunner, Job
from app.sandbox import jobqueue, pools
from app.sandbox.job_limits import Limits
from tests.helpers import make_settings

HOST = json.loads(json.dumps(DEFAULT_HOST.payload()))  # as the fork server and its children read it


def payload(**kw) -> dict:
    """A job's payload as the fork server receives it (JSON both ways)."""
    return json.loads(json.dumps(Job(code="print(1)", **kw).payload()))


def test_only_a_one_process_job_on_the_very_host_fits_a_session_built_ahead():
    assert fits_ahead(payload(), HOST)
    assert fits_ahead(payload(mode="grade", grade={"exercise": "x", "probe": None}), HOST)
    assert fits_ahead(payload(filename="other.py", trace=True), HOST)
    assert not fits_ahead(payload(host=DEFAULT_HOST.with_gpus(2)), HOST)
    assert not fits_ahead(payload(host=machine_host("l4")), HOST)
    assert not fits_ahead(payload(nproc=2), HOST)
    assert not fits_ahead(payload(launcher="accelerate"), HOST)
    assert not fits_ahead({**payload(), "rank": {"rank": 0, "local_rank": 0}}, HOST)
    assert not fits_ahead({**payload(), "host": None}, HOST)
    assert not fits_ahead(payload(), None)
    mac = json.loads(json.dumps(host_for(build="macos-arm64").payload()))
    assert not fits_ahead({**payload(), "host": mac}, mac)  # a Mac's session watches the import by the file's name


class Server:
    """What PreforkPool asks of the fork server: its default limits, and a child now (recorded)."""

    def __init__(self) -> None:
        self.defaults = "defaults"
        self.spawned: list = []
        self.jobs: dict = {}  # running jobs (status None) and finished ones
        self.waiting: list = []  # queued jobs
        self.ended: list = []  # when jobs ended
        self.refuse, self.closing, self.cpu_pool, self.gpu_pool = None, False, None, None  # for JobQueue.refill_pools
        self.cgroups = SimpleNamespace(jobs_cores=lambda: 1.5, cores=2.0)  # two cores, half of one kept for pages

    def job_cores(self) -> float:
        return jobqueue.JobQueue.job_cores(self)

    def spawn_child(self, limits, net=None, ahead=None, spare=False, warm_ahead=False):
        child = SimpleNamespace(limits=limits, net=net, ahead=ahead, spare=spare, ready=True, warm_ahead=warm_ahead)
        self.spawned.append(child)
        return child


def test_the_pool_keeps_its_size_of_children_that_built_ahead_and_one_that_built_nothing():
    server = Server()
    pool = pools.PreforkPool(server, 2, HOST)
    pool.refill()
    assert [c.ahead for c in pool.waiting] == [HOST, HOST, None]
    plain = pool.waiting[2]
    other = payload(host=machine_host("l4"))
    assert pool.take("defaults", None, other) is plain  # another machine: the child that built nothing
    assert pool.take("defaults", None, other).ahead is None  # none left waiting: one forked for it
    assert len(pool.waiting) == 2
    pool.refill()
    assert [c.ahead for c in pool.waiting] == [HOST, HOST, None]  # the pool made a plain one again
    assert pool.take("defaults", None, payload()).ahead == HOST  # the default machine: one that built it
    pool.refill()
    assert [c.ahead for c in pool.waiting] == [HOST, None, HOST]
    for _ in range(2):
        assert pool.take("defaults", None, payload()).ahead == HOST
    assert pool.take("defaults", None, payload()).ahead is None  # only the plain one left: it serves too
    forked = pool.take("other limits", None, payload())
    assert forked.ahead is None and forked.warm_ahead is False  # forked for the job: builds and warms nothing


def test_children_made_while_the_jobs_fill_the_cores_skip_the_warm_ups_and_the_others_do_not():
    server = Server()
    server.cpu_pool = pool = pools.PreforkPool(server, 2, HOST)
    refill = lambda: jobqueue.JobQueue.refill_pools(server)  # noqa: E731 - the fork server's own step
    refill()
    assert [c.warm_ahead for c in pool.waiting] == [True, True, True]
    past_hold = time.monotonic() - jobqueue.REFILL_HOLD_S - 1
    running = SimpleNamespace(status=None, started=past_hold)
    server.jobs = {"a": running, "b": SimpleNamespace(status=0, started=past_hold)}
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is True  # one job on 1.5 cores: a lone learner's, a core left for the warm-ups
    server.jobs = {"a": running, "c": running}
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is False  # the jobs fill the cores: the child is soon taken
    server.jobs, server.waiting = {"a": running}, [("queued", {}, "defaults", pool, None, None)]
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is False  # a job waits for a child: as busy
    server.jobs, server.waiting, server.ended = {"a": running}, [], [time.monotonic()]
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is False  # one has just ended: under load the next is on its way
    server.jobs, server.ended = {"a": running}, [time.monotonic() - jobqueue.REFILL_HOLD_S - 0.01]
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is True  # the last ended before the hold: the learner is reading its verdict
    server.jobs, server.ended = {"b": SimpleNamespace(status=0, started=past_hold)}, []
    pool.take("defaults", None, payload())
    refill()
    assert pool.waiting[-1].warm_ahead is True


def test_the_cores_jobs_may_use_are_the_jobs_cap_else_the_servers():
    server = Server()
    assert server.job_cores() == 1.5
    server.cgroups = SimpleNamespace(jobs_cores=lambda: None, cores=2.0)  # no reserve: no cap
    assert server.job_cores() == 2.0
    server.cgroups = None  # no cgroups at all (not root)
    assert server.job_cores() == len(os.sched_getaffinity(0))


def test_a_job_takes_a_ready_child_before_one_still_building():
    server = Server()
    pool = pools.PreforkPool(server, 1, HOST)
    pool.refill()
    built, plain = pool.waiting
    built.ready = False  # still isolating itself, or building the session
    assert pool.take("defaults", None, payload()) is plain  # the ready one, though it built nothing
    assert pool.take("defaults", None, payload()) is built  # then the one that is getting ready


def test_one_child_that_built_ahead_has_a_spare_for_a_graded_jobs_copy_and_such_jobs_prefer_it():
    server = Server()
    pool = pools.PreforkPool(server, 2, HOST)
    pool.refill()
    assert [(c.ahead, c.spare) for c in pool.waiting] == [(HOST, True), (HOST, False), (None, False)]
    graded = payload(mode="grade", grade={"exercise": "x", "probe": None,
                                          "elsewhere": [{"id": "cpu", "title": "A laptop", "host": None}]})
    without_copies = payload(mode="grade", grade={"exercise": "x", "probe": None})
    spare, built, _plain = pool.waiting
    assert pool.take("defaults", None, payload()) is built  # a run: the one without a spare
    assert pool.take("defaults", None, without_copies) is spare  # no other built ahead: it serves too
    pool.refill()
    assert [(c.ahead, c.spare) for c in pool.waiting] == [(None, False), (HOST, True), (HOST, False)]
    assert pool.take("defaults", None, graded).spare
    pool.refill()
    assert pool.take("defaults", None, graded).spare
    single = pools.PreforkPool(Server(), 1, HOST)  # with one child built ahead, every job takes it: no spare
    single.refill()
    assert [c.spare for c in single.waiting] == [False, False]


def test_a_pool_without_a_host_to_build_keeps_its_size_of_plain_children():
    pool = pools.PreforkPool(Server(), 2, None)
    pool.refill()
    assert [c.ahead for c in pool.waiting] == [None, None]
    assert pool.take("defaults", None, payload()).ahead is None
    empty = pools.PreforkPool(Server(), 0, HOST)
    empty.refill()
    assert empty.waiting == []


CHILD = """\
import json
from app.harness import session
from app.harness.contract import DEFAULT_HOST, machine_host
from app.harness.machine.clock import CLOCK, REAL_MONOTONIC, REAL_SLEEP
host = json.loads(json.dumps(DEFAULT_HOST.payload()))
session.ahead(host)
try:
    session.prepare({"code": "", "host": machine_host("l4").payload(), "nproc": 1}, "learner.py", grading=True)
    refused = False
except RuntimeError:
    refused = True
REAL_SLEEP(0.5)  # waiting for the job
built = session.prepare({"code": "", "host": host, "nproc": 1}, "learner.py", grading=True)
print(json.dumps({"refused": refused, "file": built.tracer.learner_file, "base_age": REAL_MONOTONIC() - CLOCK._bases[1],
                  "simulated": built.simulated, "device": built.device_line()}))
"""


def test_a_child_that_built_one_machine_refuses_a_job_for_another_and_gives_the_one_that_fits_its_start():
    """The child's own check, behind the server's: a session built for one host never serves another; the job that
    fits takes it over, its file named and its clock's real bases taken then, not when the session was built."""
    import subprocess
    import sys

    from app import ROOT

    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["refused"] and facts["file"] == "learner.py"
    assert facts["simulated"] and facts["device"] == "cuda:0 (simulated on CPU)"
    assert facts["base_age"] < 0.25


WARM_UP = """\
import gc, json, torch
from torch.utils.data import dataloader
from app.harness import session
from app.harness.contract import DEFAULT_HOST
from app.harness.machine.clock import CLOCK
from app.harness.machine.memory import Memory
from app.harness.tracing import placement
host = json.loads(json.dumps(DEFAULT_HOST.payload()))
def patchable():
    return torch.nn.Module.to, torch.cuda.is_available, dataloader._BaseDataLoaderIter.__next__, torch.Tensor.pin_memory
patched = patchable()
torch.manual_seed(3)
state, modes = torch.get_rng_state(), torch._C._len_torch_function_stack()
session.warm_simulation(host)
print(json.dumps({"ran": torch.nn.functional.mse_loss in placement._FUNCS,
                  "rng": torch.equal(torch.get_rng_state(), state), "clock": CLOCK.figures,
                  "modes": torch._C._len_torch_function_stack() - modes,
                  "memories": sum(type(o) is Memory for o in gc.get_objects()),
                  "patched": patched != patchable()}))
"""


def test_the_simulations_warm_up_in_a_waiting_child_leaves_nothing_behind():
    """session.warm_simulation runs a training step through a throwaway tracer before the session is built ahead:
    after it the host's random state, the mode stack and the (unconfigured) modeled clock are as they were, its
    memory model is gone and nothing is patched; only caches remain (the jobs above show the same outcomes)."""
    import subprocess
    import sys

    from app import ROOT

    done = subprocess.run([sys.executable, "-c", WARM_UP], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "ran": True, "rng": True, "clock": None, "modes": 0, "memories": 0, "patched": False}


PROGRAM = """\
import time, torch
wall, mono = time.time(), time.monotonic()
# the GPU's generator, unseeded: CUDA's fixed default seed, which no warm-up of a waiting child may have moved (the
# host's generator is each job's own, drawn at its start: app/harness/interpreter.py)
print("unseeded", torch.cuda.initial_seed(), torch.rand(3, device="cuda").tolist())
torch.manual_seed(0)
model = torch.nn.Linear(64, 8).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(3):
    loss = torch.nn.functional.mse_loss(model(torch.randn(32, 64, device="cuda")), torch.zeros(32, 8, device="cuda"))
    opt.zero_grad()
    loss.backward()
    opt.step()
end.record()
torch.cuda.synchronize()
print(torch.cuda.get_device_name(0), torch.cuda.device_count(), round(loss.item(), 6))
print("allocated", torch.cuda.memory_allocated())
print("kernels ms", start.elapsed_time(end))
print("clocks", repr(wall), repr(mono))
"""


@pytest.fixture(scope="module")
def ahead(tmp_path_factory):
    """A real sandbox whose waiting child builds the default machine ahead (one child, as in the other sandbox
    tests). A job with limits of its own always gets a child forked for it, which builds nothing: the same job
    both ways, in one fork server."""
    # as many jobs at once as the host has cores: _busy_child fills the cores jobs may use
    with BlockingRunner(make_settings(tmp_path_factory.mktemp("ahead"), sandbox_prefork=1,
                                      runner_concurrency=max(2, len(os.sched_getaffinity(0))))) as runner:
        yield runner


def _own_limits(runner) -> Limits:
    return replace(runner.runner.limits, wall_s=runner.runner.limits.wall_s + 1)


def _run(runner, job: Job) -> tuple[list[str], tuple[float, float]]:
    result = runner.run(job)
    assert result.status == "ok", result
    *lines, clocks = result.stdout.splitlines()
    _, wall, mono = clocks.split()
    return lines, (float(wall), float(mono))


@pytest.mark.parametrize("host", [DEFAULT_HOST, machine_host("l4"), DEFAULT_HOST.with_gpus(2)],
                         ids=["default machine", "another machine", "more GPUs"])
def test_a_job_ends_alike_whether_its_child_built_the_default_machine_ahead_or_not(ahead, host):
    job = Job(code=PROGRAM, filename="learner.py", host=host)
    built, plain = _run(ahead, job)[0], _run(ahead, replace(job, limits=_own_limits(ahead)))[0]
    # the event pair times the host too, as on a real GPU (the graded test below says why that differs between a
    # child that warmed its pages and one forked for the job); the rest is the same to the digit
    for lines in (built, plain):
        elapsed = lines.pop(3)
        assert elapsed.startswith("kernels ms ") and float(elapsed.split()[-1]) > 0, elapsed
    assert built == plain
    assert built[0].startswith("unseeded") and built[1].startswith(host.gpu_name)


def test_the_programs_clocks_start_when_its_job_does_not_when_its_child_built_the_clock(ahead):
    ahead.run(Job(code="print(1)"))
    time.sleep(1.5)  # the pool's next child has built its session (and its clock) long before the job comes
    before_wall, before_mono = time.time(), time.monotonic()
    _, (wall, mono) = _run(ahead, Job(code=PROGRAM))
    assert before_wall - 0.05 <= wall <= time.time()
    assert before_mono - 0.05 <= mono <= time.monotonic()


def _busy_child(runner) -> None:
    """Leave the pool's next child one made while other jobs filled the cores jobs may use, which skips the page
    warm-ups."""
    cores = runner.runner.info["jobs_cpu_cores"] or float(len(os.sched_getaffinity(0)))
    sleep = "import time; time.sleep(2)"
    sleepers = [threading.Thread(target=runner.run, args=(Job(code=sleep, limits=_own_limits(runner)),))
                for _ in range(math.ceil(cores) - 1)]  # each in a child forked for it; the pool's children wait
    # the last takes the child that warmed up; its replacement is made while all of them run
    sleepers.append(threading.Thread(target=runner.run, args=(Job(code=sleep),)))
    for sleeper in sleepers:
        sleeper.start()
        time.sleep(0.3)
    time.sleep(0.5)  # ... and has built its session
    for sleeper in sleepers:
        sleeper.join()


def test_a_graded_job_on_the_default_machine_reports_the_same_facts_either_way(ahead):
    probe = "def probe(ns, api):\n    return {'device': api.device_of(ns['model'].weight), 'acc': api.accelerator}\n"
    job = Job(code=PROGRAM, filename="learner.py", mode="grade", grade={"exercise": "t", "probe": probe},
              key="k3y")
    reports = []
    for limits, busy in ((None, False), (_own_limits(ahead), False), (None, True)):
        if busy:
            _busy_child(ahead)
        result = ahead.run(replace(job, limits=limits))
        assert result.status == "ok", result
        report = result.report
        assert report["nonce"] == "k3y"
        report["outcome"].pop("duration_ms")
        *lines, elapsed, _clocks = result.stdout.splitlines()
        # an event pair around a launch-bound loop times the host too, as on a real GPU: the learner's own CPU time
        # between launches, which a child that did not warm its pages (made for the job, or while the sandbox was
        # busy) spends partly in page faults; the device's side (the timeline's kernels) is the same either way
        assert elapsed.startswith("kernels ms ") and float(elapsed.split()[-1]) > 0, elapsed
        reports.append((lines, report["probe"], report["device"], report["tampered"],
                        report["outcome"], report["trace"]["counts"], report["trace"]["ops"],
                        report["timeline"]["kernels"], report["timeline"]["gpu_busy_ms"]))
    assert reports[0] == reports[1] == reports[2]
    assert reports[0][1] == {"device": "cuda:0", "acc": "cuda:0"}


FIRST_PLACEMENT = """\
import json, os, sys, warnings
from dataclasses import replace
import torch
from app.harness import session
from app.harness.contract import DEFAULT_HOST
from app.harness.machine import cuda_runtime
host = json.loads(json.dumps(replace(DEFAULT_HOST.with_gpus(2), capability=tuple(json.loads(sys.argv[1]))).payload()))
torch.default_generator.manual_seed(11)  # the host's alone (each process starts from its own random state)
session.ahead(host)
if sys.argv[2] == "rehearse":
    session.warm_seeding()
    session.warm_first_placement()
job = session.prepare({"code": "", "host": host, "nproc": 1}, "learner.py", grading=False)
before = {"initialized": torch.cuda.is_initialized(), "generators": len(torch.cuda.default_generators),
          "properties": "_get_device_properties" in vars(torch.cuda), "poisoned": len(cuda_runtime._POISONED),
          "queued": [getattr(c, "__name__", "?") for c, _ in torch.cuda._queued_calls],
          "visible": job.devices.visible, "warnings_module": torch.cuda.warnings is warnings,
          "seed_queues": [vars(m._lazy_seed_tracker) == {"manual_seed_all_cb": None, "manual_seed_cb": None,
                          "call_order": []} for m in (torch.cuda, torch.xpu, torch.mtia)],
          "host_seed": torch.initial_seed(), "host_draw": torch.rand(2).tolist()}
if sys.argv[3] == "seeded":
    torch.manual_seed(3)  # queued until the first placement
os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # read at the first placement, not before
with warnings.catch_warnings(record=True) as shown:
    warnings.simplefilter("default")
    x = torch.ones(2, device="cuda")
pid = os.fork()
if pid == 0:
    os._exit(3 if torch.cuda._is_in_bad_fork() else 4)
forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps({**before, "count": torch.cuda.device_count(), "name": torch.cuda.get_device_name(0),
                  "capability": list(torch.cuda.get_device_capability(0)), "draw": torch.rand(2).tolist(),
                  "cuda_draw": torch.cuda.default_generators[0].initial_seed(), "generators_after":
                  len(torch.cuda.default_generators), "seed": torch.cuda.initial_seed(), "warnings": [
                  str(w.message).strip() for w in shown], "bad_fork_child": forked, "device": str(x.device)}))
"""


@pytest.mark.parametrize(("capability", "seeded"), [([9, 0], "seeded"), ([6, 0], "not seeded")],
                         ids=["supported, seeded", "a GPU the wheel was not built for"])
def test_the_first_placement_is_the_jobs_own_after_the_waiting_child_rehearsed_it(capability, seeded):
    """session.warm_seeding and session.warm_first_placement run torch.manual_seed and torch's CUDA initialisation
    on the session built ahead and undo them: the job then finds the host's random state and seed as they were,
    nothing queued to seed, CUDA uninitialised; it reads CUDA_VISIBLE_DEVICES at its own first placement, seeds the
    GPU with its own seed (or the default one), gets torch's warning for a GPU its wheel has no code for, and
    poisons its own forks, exactly as a child that rehearsed nothing."""
    import subprocess
    import sys

    from app import ROOT

    facts = []
    for way in ("rehearse", "not"):
        done = subprocess.run([sys.executable, "-c", FIRST_PLACEMENT, json.dumps(capability), way, seeded],
                              capture_output=True, text=True, cwd=ROOT, timeout=300,
                              env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr
        facts.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert facts[0] == facts[1]
    assert facts[0]["initialized"] is False and facts[0]["count"] == 1 and facts[0]["bad_fork_child"] == 3
    assert bool(facts[0]["warnings"]) == (capability == [6, 0]) and all(facts[0]["seed_queues"])
    assert facts[0]["cuda_draw"] == (3 if seeded == "seeded" else facts[0]["seed"])
