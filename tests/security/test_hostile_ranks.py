"""Hostile programs run as two ranks (`course run --nproc 2`), under both pools: whatever one rank does is contained
by the group's one set of limits, nothing of the group outlives it, its sockets reach only its own loopback, and
the same fork server runs the next job (conftest.still_serves)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import time

import pytest

from tests.security.hostile import MiB, gone, procs_named, run_ranks


def host_addresses() -> list[str]:
    """This host's IPv4 addresses other than loopback (where a rank might look for the host)."""
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return []
    return [line.split()[3].split("/")[0] for line in out.splitlines()
            if len(line.split()) > 3 and not line.split()[3].startswith("127.")]


def test_a_rank_that_fork_bombs_is_stopped_with_its_group(sandbox):
    marker = "sbxr" + secrets.token_hex(4)  # its own: the other pool's run of this test may be bombing meanwhile
    r = run_ranks(sandbox, "ranks_fork_bomb", {"MARKER": marker}, wall_s=3)
    assert r.status == "limit" and r.limit_hit in ("pids", "wall"), r
    # reaping a few hundred forked processes takes the kernel a while on a loaded 2-core host: the claim is that
    # none survive, not how fast they go (1 s failed under load with the group already killed)
    assert gone(marker + "b", within_s=5.0) and gone(marker + "w", within_s=5.0)


def test_ranks_spinning_on_threads_share_one_cpu_allowance(sandbox):
    r = run_ranks(sandbox, "ranks_spin", cpu_s=2, wall_s=10)
    assert r.status == "limit" and r.limit_hit == "cpu", r


def test_a_rank_flooding_output_is_cut_and_the_group_stopped(sandbox):
    r = run_ranks(sandbox, "ranks_output_flood")
    assert r.status == "limit" and r.limit_hit == "output", r
    assert "FINISHED FLOOD" not in r.stdout
    assert len(r.stdout.encode()) <= sandbox.runner.limits.output_bytes and "output limit" in r.stderr


def test_a_rank_growing_without_bound_hits_the_groups_memory_limit(sandbox):
    r = run_ranks(sandbox, "ranks_memory_bomb", memory_bytes=128 * MiB)
    assert r.status == "limit" and r.limit_hit == "memory", r
    assert "memory limit of 256 MiB" in r.stderr  # the group's: two ranks' share


@pytest.fixture
def host_listeners():
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("0.0.0.0", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    yield tcp, udp
    tcp.close()
    udp.close()


def test_ranks_reach_nothing_but_their_own_loopback(sandbox, host_listeners):
    tcp, udp = host_listeners
    subs = {"PORT": tcp.getsockname()[1], "UDP_PORT": udp.getsockname()[1], "HOST_ADDRESSES": host_addresses()}
    r = run_ranks(sandbox, "ranks_connect_elsewhere", subs)
    assert r.status == "ok", r
    assert "CONNECTED" not in r.stdout
    assert r.stdout.count("denied") == 2 * (4 + len(subs["HOST_ADDRESSES"]))
    assert r.stdout.count("interfaces ['lo']") == 2  # the namespace holds its loopback and nothing else
    time.sleep(0.2)
    with pytest.raises(BlockingIOError):
        tcp.accept()
    with pytest.raises(BlockingIOError):
        udp.recvfrom(100)


def test_nothing_a_rank_leaves_behind_outlives_the_group(sandbox):
    marker = "sbxr" + secrets.token_hex(4)
    r = run_ranks(sandbox, "ranks_leftover", {"MARKER": marker})
    assert r.status == "ok" and r.stdout.count("left a child behind") == 2, r
    assert gone(marker, within_s=5.0)  # what survived would sleep 60 s; what was killed exits in the idle cgroup
    time.sleep(0.5)
    assert procs_named(marker) == []
