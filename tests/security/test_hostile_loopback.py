"""Hostile programs run as one process with its own loopback (Job.loopback: a lesson block marked `loopback`, for
DataLoader workers or a one-process gloo group), under both pools. The job gets the network namespace and seccomp
variant of a job of several ranks; what stays: its sockets reach only its own loopback, another such job beside it
is out of reach, it writes nowhere but its own tmpfs and sees none of the host, its processes are bounded, and the
same fork server runs the next job (conftest.still_serves)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import threading
import time

import pytest

from app.runner import Job
from tests.security.hostile import gone, run_loopback
from tests.security.test_hostile_ranks import host_addresses, host_listeners  # noqa: F401 - a fixture

# a job with its own loopback, listening on it (TCP, an abstract AF_UNIX name, a socket file), until told the end
VICTIM = """import socket
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.bind(("127.0.0.1", 0))
tcp.listen(8)
abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abstract.bind("\\0__NAME__")
abstract.listen(8)
path = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
path.bind("/tmp/__NAME__.sock")
path.listen(8)
print("LISTENING", tcp.getsockname()[1], flush=True)
for s in (tcp, abstract, path):
    s.settimeout(0.1)
for _ in range(__STAY_S__ * 10):  # a count of 0.1 s waits: the harness models the program's clocks
    for s in (tcp, abstract, path):
        try:
            s.accept()
            print("ACCEPTED", flush=True)
        except OSError:
            pass
print("VICTIM done", flush=True)
"""


def test_a_loopback_job_reaches_nothing_but_its_own_loopback(sandbox, host_listeners):  # noqa: F811
    tcp, udp = host_listeners
    subs = {"PORT": tcp.getsockname()[1], "UDP_PORT": udp.getsockname()[1], "HOST_ADDRESSES": host_addresses()}
    r = run_loopback(sandbox, "loopback_connect_elsewhere", subs)
    assert r.status == "ok", r
    assert "own loopback ping" in r.stdout  # what the flag is for
    assert "CONNECTED" not in r.stdout and "OPENED" not in r.stdout
    assert r.stdout.count("denied") == 4 + len(subs["HOST_ADDRESSES"]) + 2
    assert "interfaces ['lo']" in r.stdout  # the namespace holds its loopback and nothing else
    time.sleep(0.2)
    with pytest.raises(BlockingIOError):
        tcp.accept()
    with pytest.raises(BlockingIOError):
        udp.recvfrom(100)


def test_a_loopback_job_cannot_reach_another_one_running_beside_it(sandbox):
    name = "sbxvictim" + secrets.token_hex(6)
    listening = threading.Event()
    lines: list[str] = []

    def on_line(event):
        lines.append(event.line)
        if event.line.startswith("LISTENING"):
            listening.set()

    box: list = []
    victim = Job(code=VICTIM.replace("__NAME__", name).replace("__STAY_S__", "6"), loopback=True,
                 limits=dataclasses.replace(sandbox.runner.limits, wall_s=40, cpu_s=40))
    thread = threading.Thread(target=lambda: box.append(sandbox.run(victim, on_line)), daemon=True)
    thread.start()
    assert listening.wait(60), lines
    port = int(next(line for line in lines if line.startswith("LISTENING")).split()[1])
    r = run_loopback(sandbox, "loopback_reach_other_job", {"PORT": port, "ABSTRACT": name})
    thread.join(60)
    assert r.status == "ok", r
    assert "CONNECTED" not in r.stdout and r.stdout.count("denied") == 3 and "no socket file" in r.stdout, r.stdout
    assert box and box[0].status == "ok" and "ACCEPTED" not in box[0].stdout, box


def test_a_loopback_job_sees_none_of_the_host_and_writes_only_its_own_tmpfs(sandbox):
    r = run_loopback(sandbox, "see_host")
    view = json.loads(re.search(r"VIEW (.*)", r.stdout).group(1))
    assert view["pids"] == [1] and view["hostname"] == "sandbox" and not view["sys"], view
    assert "LEAK" not in r.stdout
    r = run_loopback(sandbox, "write_system_dirs")
    assert "WROTE" not in r.stdout and "tmp ok" in r.stdout
    for path in ("/etc/sbx_probe", "/usr/sbx_probe", "/var/sbx_probe", "/sbx_probe"):
        assert not os.path.exists(path)


def test_a_loopback_job_that_fork_bombs_hits_the_pids_limit_and_leaves_nothing(sandbox):
    marker = "sbxf" + secrets.token_hex(4)  # its own: another test's fork bomb may be running meanwhile
    r = run_loopback(sandbox, "fork_bomb", {"MARKER": marker}, wall_s=3)
    assert r.status == "limit" and r.limit_hit in ("pids", "wall"), r
    assert gone(marker, within_s=5.0)
