"""Small parts of the sandbox: framing, line splitting and caps, the result's verdict on limits."""

from __future__ import annotations

import signal
from types import SimpleNamespace

from app.sandbox import protocol
from app.sandbox.jobstate import RunningJob
from app.sandbox.limits import Limits


def test_frames_roundtrip_in_pieces():
    data = protocol.encode({"op": "a", "x": "é" * 1000}) + protocol.encode({"op": "b"})
    reader = protocol.FrameReader()
    got = []
    for i in range(0, len(data), 7):
        got += reader.feed(data[i:i + 7])
    assert [m["op"] for m in got] == ["a", "b"] and got[0]["x"] == "é" * 1000


def _job(**limits):
    sent = []
    job = RunningJob("j", SimpleNamespace(limits=Limits(**limits)), sent.append)
    return job, sent


def test_lines_are_split_across_reads_and_capped():
    job, sent = _job(output_bytes=20)
    assert job.on_output("stdout", b"hel")
    assert job.on_output("stdout", b"lo\nwor")
    assert not job.on_output("stdout", b"ld\n" + b"z" * 100)
    job.flush()
    lines = [line for frame in sent for _, line in frame["lines"]]
    assert lines[:2] == ["hello", "world"] and len("".join(job.text["stdout"]).encode()) == 20


def test_memory_error_traceback_means_memory_limit():
    job, _ = _job()
    job.on_output("stderr", b"Traceback...\nMemoryError\n")
    job.status = 1 << 8
    result = job.result(cgroup_oom=False, pids_hit=False, setup_error=None)
    assert (result["status"], result["limit_hit"], result["exit_code"]) == ("limit", "memory", 1)


def test_signal_and_setup_error():
    job, _ = _job()
    job.status = signal.SIGKILL  # raw wait status of a process killed by SIGKILL
    assert job.result(cgroup_oom=True, pids_hit=False, setup_error=None)["limit_hit"] == "memory"
    job2, _ = _job()
    job2.status = 125 << 8
    r = job2.result(cgroup_oom=False, pids_hit=False, setup_error="could not start: mount failed")
    assert r["status"] == "error" and "mount failed" in r["message"]


def test_report_is_parsed_and_bounded():
    job, _ = _job()
    job.on_report(b'{"trace": [1, 2]}')
    job.status = 0
    assert job.result(cgroup_oom=False, pids_hit=False, setup_error=None)["report"] == {"trace": [1, 2]}
    job2, _ = _job()
    job2.on_report(b"x" * (5 << 20))
    job2.status = 0
    assert job2.result(cgroup_oom=False, pids_hit=False, setup_error=None)["report"] is None
