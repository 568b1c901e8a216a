"""One rank of a job of several ranks: what runs in a rank process, from the fork to its exit.

The launcher (launch.py) forks each rank from its own warm state. A rank's stdout and stderr are pipes to the
launcher, which prefixes their lines; its third descriptor is a channel to the launcher carrying JSON lines:

    {"traceback": text, "at": t}   the learner's uncaught exception (the launcher shows the first failure's first)
    {"report": {...}}               grading mode: this rank's facts, which the launcher merges into the job's report

The rank holds neither the job's report pipe nor its status pipe (they are closed right after the fork), so the
learner's code in a rank cannot write the job's report; it never sees the job's nonce in a pipe it can write.
"""

from __future__ import annotations

import json
import linecache
import os
import signal
import sys
import traceback

from app.harness import grade, interpreter, plain, session
from app.harness.contract import JobPayload, SimulatedHost
from app.harness.machine import chrome_trace, clock
from app.harness.machine.clock import REAL_MONOTONIC

CHANNEL_FD = 3
# the role torchrun gives its workers when none is named (`--role`); it starts every output prefix
ROLE = "default"
# descriptors a rank may have open at the fork; everything above its channel is the launcher's
MAX_FD = 1024


# the host name of simulated machine g (/etc/hosts of a job of several ranks maps node0.. to its loopback)
NODE = "node{}"


def environment(rank: int, nproc: int, port: int, run_id: str, nnodes: int = 1) -> dict[str, str]:
    """What torchrun's agent puts in a worker's environment (torch/distributed/elastic/agent/server/
    local_elastic_agent.py, `_start_workers`): `--standalone --nproc-per-node=N` on one machine (local = global),
    or `--nnodes=M --nproc-per-node=N --rdzv-backend=c10d` on each of M machines: nproc = M * N ranks in all,
    rank r on machine r // N as its local rank r % N, and MASTER_ADDR the host of machine 0, where the
    rendezvous' store is."""
    per_node = nproc // nnodes
    master = "127.0.0.1" if nnodes == 1 else NODE.format(0)
    env = {"RANK": str(rank), "GROUP_RANK": str(rank // per_node), "ROLE_RANK": str(rank), "ROLE_NAME": ROLE,
           "LOCAL_RANK": str(rank % per_node), "LOCAL_WORLD_SIZE": str(per_node), "WORLD_SIZE": str(nproc),
           "GROUP_WORLD_SIZE": str(nnodes), "ROLE_WORLD_SIZE": str(nproc), "MASTER_ADDR": master,
           "MASTER_PORT": str(port), "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
           "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_USE_AGENT_STORE": "True",
           "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "1"}
    if os.path.exists("/dev/nvidiactl"):  # real GPUs: NCCL leaves out `lo` unless told, and lo is all there is
        env["NCCL_SOCKET_IFNAME"] = "lo"
    return env


def start(payload: dict, rank: int, env: dict[str, str], fds: tuple[int, int, int]) -> None:
    """In the forked rank process: take its pipes and environment, run the learner's file, exit. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)  # the launcher's, about to be closed here
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)  # torchrun stops a rank with SIGTERM: Python's default ends it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out, err, channel = fds
        for target, fd in ((1, out), (2, err), (CHANNEL_FD, channel)):
            os.dup2(fd, target)
        os.closerange(CHANNEL_FD + 1, MAX_FD)  # the job's report and status pipes, the other ranks' pipes
        os.environ.update(env)
        interpreter.start(payload.get("filename") or "main.py", payload.get("code"))  # each a new interpreter
        code = run(payload, rank)
    except BaseException:  # the harness itself broke: show it like Python would
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    os._exit(code if isinstance(code, int) and 0 <= code <= 255 else 1)


def run(payload: JobPayload, rank: int) -> int:
    """Run the learner's file as this rank (graded or plain); return the exit code."""
    payload = {**payload, "rank": {"rank": rank, "local_rank": int(os.environ["LOCAL_RANK"]),
                                   "node": int(os.environ["GROUP_RANK"]), "world_size": int(os.environ["WORLD_SIZE"])}}
    show = _traceback_sender(rank)
    if payload.get("mode") == "grade":
        grade_spec = dict(payload.get("grade") or {})
        payload["grade"] = None
        report, status = grade.collect(payload, grade_spec, show_traceback=show)
        budget = grade.REPORT_BUDGET // (int(os.environ["WORLD_SIZE"]) + 1)  # the job's report holds them all
        _write(b'{"report": ' + grade.encode_report(report, budget) + b"}\n")
        return status
    filename, code = payload.get("filename", "main.py"), payload["code"]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    if SimulatedHost.from_payload(payload.get("host")).simulated:
        session.prepare(payload, filename, grading=False)
    status = plain.run_plain(code, filename, show)
    if payload.get("trace") and clock.CLOCK.active:  # `course run --trace`: this rank's part of the job's trace
        world = int(os.environ["WORLD_SIZE"])
        send({"chrome_trace": chrome_trace.timeline(clock.CLOCK, limit=clock.TRACE_EVENTS_KEPT // world)})
    return status


def send(message: dict) -> None:
    """Write one JSON line to the launcher."""
    _write((json.dumps(message, default=str) + "\n").encode())


def _write(line: bytes) -> None:
    data = memoryview(line)
    try:
        while data:
            data = data[os.write(CHANNEL_FD, data):]
    except OSError:  # the launcher is gone: the job is over anyway
        pass


def _traceback_sender(rank: int):
    def show(text: str) -> None:
        # torch.distributed's init_process_group puts "[rank<r>]: " before every line of a traceback
        if getattr(sys.excepthook, "__name__", "") == "_distributed_excepthook":
            text = "\n".join(f"[rank{rank}]: {line}" if line else "" for line in text.split("\n"))
        sys.stdout.flush()
        send({"traceback": text, "at": REAL_MONOTONIC()})  # the launcher compares real times
    return show
