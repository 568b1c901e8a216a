"""A job of several ranks, as `torchrun --standalone --nproc-per-node=2` starts them, through the real sandbox."""

from __future__ import annotations

import json
import re
import uuid

from app.harness.contract import DEFAULT_HOST
from app.runner import Job
from app.sandbox.job_limits import Limits

MiB = 1 << 20


def run_ranks(sandbox, code: str, nproc: int = 2, **limits):
    lim = sandbox.runner.limits.__class__(**{**sandbox.runner.limits.to_dict(), **limits}) if limits else None
    return sandbox.run(Job(code=code, filename="ranks.py", host=DEFAULT_HOST.with_gpus(nproc), nproc=nproc, limits=lim))


def by_rank(text: str) -> dict[int, list[str]]:
    """Split prefixed output into each rank's lines."""
    lines: dict[int, list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"\[default(\d+)\]:(.*)", line)
        if match:
            lines.setdefault(int(match.group(1)), []).append(match.group(2))
    return lines


def test_each_rank_gets_torchruns_environment(sandbox):
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "ROLE_NAME", "GROUP_RANK", "OMP_NUM_THREADS"]
    r = run_ranks(sandbox, f"import json, os\nprint(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))\n")
    assert (r.status, r.exit_code) == ("ok", 0), r.stderr
    envs = {rank: json.loads(lines[0]) for rank, lines in by_rank(r.stdout).items()}
    assert sorted(envs) == [0, 1]
    for rank, env in envs.items():
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == (str(rank), str(rank),
                                                                                                "2", "2")
        assert (env["MASTER_ADDR"], env["ROLE_NAME"], env["GROUP_RANK"], env["OMP_NUM_THREADS"]) == (
            "127.0.0.1", "default", "0", "1")
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True" and env["MASTER_PORT"].isdigit()
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    assert envs[0]["TORCHELASTIC_RUN_ID"] == envs[1]["TORCHELASTIC_RUN_ID"]
    uuid.UUID(envs[0]["TORCHELASTIC_RUN_ID"])


def test_ranks_are_forked_from_the_warm_server_not_started_cold(sandbox):
    code = ("import os, sys\n"
            "print(open('/proc/self/cmdline').read().replace('\\0', ' ').strip(), os.getppid(),"
            " 'torch' in sys.modules)\n")
    r = run_ranks(sandbox, code)
    for lines in by_rank(r.stdout).values():
        # the fork server's own command line: no interpreter was started for the rank; its parent is the launcher
        assert len(lines) == 1 and "python -m app.sandbox.server {" in lines[0]
        assert lines[0].endswith(" 1 True")


def test_the_ranks_talk_over_a_loopback_of_their_own_and_nothing_else(sandbox):
    code = '''import os, socket, time
rank = int(os.environ["RANK"])
print("interfaces", socket.if_nameindex())
if rank == 0:
    server = socket.create_server(("127.0.0.1", 29400))
    conn, _ = server.accept()
    print("got", conn.recv(5))
else:
    for _ in range(100):
        try:
            client = socket.create_connection(("127.0.0.1", 29400))
            break
        except ConnectionRefusedError:
            time.sleep(0.02)
    client.sendall(b"hello")
'''
    r = run_ranks(sandbox, code)
    assert r.status == "ok", r.stderr
    lines = by_rank(r.stdout)
    assert lines[0][0] == lines[1][0] == "interfaces [(1, 'lo')]"
    assert lines[0][1] == "got b'hello'"


def test_only_the_ranks_socket_families_are_allowed(sandbox):
    code = '''import socket
for name, args in (("netlink audit", (socket.AF_NETLINK, socket.SOCK_RAW, 9)),
                   ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0)),
                   ("vsock", (socket.AF_VSOCK, socket.SOCK_STREAM, 0)),
                   ("inet", (socket.AF_INET, socket.SOCK_STREAM, 0)),
                   ("netlink route", (socket.AF_NETLINK, socket.SOCK_RAW, 0))):
    try:
        socket.socket(*args).close()
        print(name, "opened")
    except OSError as exc:
        print(name, "refused", exc.errno)
'''
    ranks = by_rank(run_ranks(sandbox, code).stdout)[0]
    assert ranks == ["netlink audit refused 1", "packet refused 1", "vsock refused 1", "inet opened",
                     "netlink route opened"]
    alone = sandbox.run_code(code).stdout.splitlines()  # one process: the filter as it always was
    assert alone == ["netlink audit refused 1", "packet refused 1", "vsock refused 1", "inet refused 1",
                     "netlink route refused 1"]


def test_a_failing_rank_fails_the_job_and_its_summary_names_it(sandbox):
    code = "import os, sys, time\nif os.environ['RANK'] == '1':\n    sys.exit(3)\ntime.sleep(30)\n"
    r = run_ranks(sandbox, code)
    assert (r.status, r.exit_code, r.limit_hit) == ("failed", 1, None)  # torchrun exits 1 whatever the rank's code
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" in r.stderr  # torchrun's own
    tail = r.stderr[r.stderr.index("ranks.py FAILED"):]
    root = tail.split("Root Cause (first observed failure):\n")[1].splitlines()
    assert root[0] == "[1]:" and re.fullmatch(r"  time      : \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d", root[1])
    assert root[2] == "  host      : sandbox" and root[3] == "  rank      : 1 (local_rank: 1)"
    assert root[4].startswith("  exitcode  : 3 (pid: ") and root[5] == "  error_file: <N/A>"
    assert root[6] == "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    assert "(SIGTERM)" in tail.split("Root Cause")[0]  # rank 0 stopped, not left to sleep


def test_unterminated_and_long_lines_keep_their_prefix(sandbox):
    code = "import sys\nsys.stdout.write('x' * 20000)\nprint()\nsys.stdout.write('last')\n"
    lines = run_ranks(sandbox, code).stdout.splitlines()
    assert all(line.startswith(("[default0]:", "[default1]:")) for line in lines)
    assert sum(len(line) - len("[default0]:") for line in lines if "x" in line) == 2 * 20000
    assert sorted(line for line in lines if line.endswith("last")) == ["[default0]:last", "[default1]:last"]


def test_the_group_shares_one_set_of_limits():
    one = Limits()
    group = one.for_ranks(4)
    assert (group.pids, group.memory_bytes) == (4 * one.pids, 4 * one.memory_bytes)
    assert (group.wall_s, group.cpu_s, group.output_bytes, group.tmpfs_bytes) == (
        one.wall_s, one.cpu_s, one.output_bytes, one.tmpfs_bytes)
    assert one.for_ranks(1) is one


def test_the_wall_clock_stops_the_whole_group(sandbox):
    r = run_ranks(sandbox, "import time\nprint('up', flush=True)\ntime.sleep(60)\n", wall_s=2)
    assert (r.status, r.limit_hit) == ("limit", "wall")
    assert sorted(by_rank(r.stdout)) == [0, 1]
