"""Small parts of the sandbox: framing, line splitting and caps, the result's verdict on limits."""

from __future__ import annotations

import signal
from types import SimpleNamespace

from app.sandbox import protocol
from app.sandbox.job_limits import Limits
from app.sandbox.jobstate import RunningJob


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


def test_the_job_pipes_are_numbered_alike_on_both_sides():
    """child.py cannot import the harness (that would import torch before the server made it single-threaded),
    so the descriptor numbers and the payload header are written twice: here they are held equal."""
    from app.harness import channel
    from app.sandbox import child, jobqueue

    assert (child.PAYLOAD_FD, child.REPORT_FD, child.STATUS_FD) == (channel.PAYLOAD_FD, channel.REPORT_FD,
                                                                    channel.STATUS_FD)
    assert jobqueue.PAYLOAD_HEADER.format == channel.PAYLOAD_HEADER.format


def test_status_pipe_tokens_are_short_and_newline_ended():
    """What the learner's code writes on the status pipe (it holds it too) never reads as the harness's tokens."""
    from types import SimpleNamespace

    from app.sandbox.jobstate import RunningJob

    job = RunningJob("j", SimpleNamespace(limits=SimpleNamespace(wall_s=1)), lambda m: None, key="k" * 32)
    assert job.on_status(b"99999999") == []  # no newline yet
    assert job.on_status(b"9" * 40 + b"\nK\n") == [b"K"]  # the overlong learner token is dropped, the K counts
    # short learner tokens come through; the server acts only on K and on 0-255
    assert job.on_status(b"junk") == [] and job.on_status(b"\n0\n") == [b"junk", b"0"]
    forged = b'{"nonce": null, "probe": {}}'  # longer than any token: dropped, up to its newline
    assert job.on_status(forged) == [] and job.on_status(b"\nK") == [] and job.on_status(b"\n") == [b"K"]
    assert job.take_key() == b"k" * 32 + b"\n" and job.take_key() is None  # the key once, then never
