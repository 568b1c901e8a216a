"""Small parts of the sandbox: framing, line splitting and caps, the result's verdict on limits."""

from __future__ import annotations

import codecs
import json
import signal
from types import SimpleNamespace

from app.harness.contract import DEFAULT_HOST, PLAIN_CPU
from app.runner.local import finished
from app.sandbox import protocol
from app.sandbox.job_limits import Limits
from app.sandbox.jobqueue import has_modeled_clock
from app.sandbox.jobstate import REPORT_REFUSED, RunningJob, limit_message


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


def test_the_wall_limit_says_more_for_a_job_on_a_simulated_gpus_clock():
    """Only a job whose program reads a simulated GPU's clock gets the hint (tests/harness/test_device_clock.py runs
    such a job to its limit), and only for the limits such a loop reaches, wall and CPU time; the laptop, the plain
    CPU and the other limits keep their sentence."""
    assert has_modeled_clock({"host": DEFAULT_HOST.payload()})
    assert not has_modeled_clock({"host": PLAIN_CPU.payload()}) and not has_modeled_clock({"host": None})
    limits = Limits(wall_s=3)
    plain = "wall-clock limit of 3 s reached; the program was stopped"
    assert limit_message("wall", limits) == plain
    assert limit_message("wall", limits, modeled_clock=True).startswith(plain + "; on a simulated GPU ")
    assert limit_message("cpu", limits, modeled_clock=True).startswith(limit_message("cpu", limits) + "; on a ")
    assert limit_message("memory", limits, modeled_clock=True) == limit_message("memory", limits)
    job = RunningJob("j", SimpleNamespace(limits=limits), lambda m: None, modeled_clock=True)
    job.status = signal.SIGKILL
    job.limit_hit = "wall"
    assert "Timer(...).timeit(100)" in job.result(cgroup_oom=False, pids_hit=False, setup_error=None)["message"]


def test_signal_and_setup_error():
    job, _ = _job()
    job.status = signal.SIGKILL  # raw wait status of a process killed by SIGKILL
    assert job.result(cgroup_oom=True, pids_hit=False, setup_error=None)["limit_hit"] == "memory"
    job2, _ = _job()
    job2.status = 125 << 8
    r = job2.result(cgroup_oom=False, pids_hit=False, setup_error="could not start: mount failed")
    assert r["status"] == "error" and "mount failed" in r["message"]


def _sent_report(report: bytes, key_requests: int = 1):
    """The report as the runner reads it from the job's result frame (the server's result, its frame, the runner's
    reading of it), and the stderr lines the runner's caller got."""
    job, sent = _job()
    job.key_requests = key_requests
    job.on_report(report)
    job.status = 0
    result = job.result(cgroup_oom=False, pids_hit=False, setup_error=None)
    data, asked = job.passed_report()
    frame = protocol.encode({"op": "done", "id": "j", "result": result, "report_asked": asked}, data)
    (message,) = protocol.FrameReader().feed(frame)
    lines = [line for out in sent for _stream, line in out["lines"]]  # the lines the server sent as they came
    result = finished(message, lambda stream, line: lines.append(line))
    assert "".join(line + "\n" for line in lines) == result["stderr"]  # the caller saw every line of stderr
    return result["report"], result["stderr"]


def test_report_is_parsed_and_bounded():
    assert _sent_report(b'{"trace": [1, 2]}')[0] == {"trace": [1, 2]}
    assert _sent_report(b"x" * (5 << 20)) == (None, f"[sandbox] {REPORT_REFUSED['overflow']}\n")


def test_the_report_reads_as_it_came_only_when_it_is_one_json_object():
    """The server passes the report's bytes on unread (the attachment of the result's frame): the runner finds what
    decoding them gives, and what does not read as a JSON object in UTF-8 is refused there, with the same words."""
    report = {"nonce": "k", "stdout": "\x00", "nan": float("nan"), "é": ["\ud800", 1e300, None]}
    got, _ = _sent_report(json.dumps(report).encode())
    assert json.dumps(got) == json.dumps(report)
    assert _sent_report(codecs.BOM_UTF8 + b'{"a": 1}')[0] == {"a": 1}  # json.loads skips it
    deep = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000  # past the parser's recursion limit
    for unreadable in (b'{"a": 1}{"a": 2}', b"[1, 2]", '{"a": 1}'.encode("utf-16"), b'{"a": "\xff"}', deep):
        report, stderr = _sent_report(unreadable)
        assert report is None and stderr == f"[sandbox] {REPORT_REFUSED['unreadable']}\n"
    assert _sent_report(b"not json", key_requests=0) == (None, "")  # the learner's bytes, and no report of ours
    assert _sent_report(b'{"a": 1}', key_requests=2) == (None, f"[sandbox] {REPORT_REFUSED['key']}\n")


def test_an_attachment_cannot_be_forged_by_the_frames_other_values():
    """The attachment's place is the frame's length words, which the server writes: no value of the JSON, nor the
    attachment's own bytes, can make the reader find another attachment or another frame."""
    attachment = b'{"real": true}' + protocol.encode({"op": "done", "id": "x", "result": {}})
    for lure in ("\x00", "attachment", '"}', ""):
        message = {"op": "done", "stdout": lure, "result": {"report": None, "stderr": lure}, "attachment": lure}
        frames = protocol.encode(message, attachment) + protocol.encode({"op": "out", "attachment": lure})
        reader, got = protocol.FrameReader(), []
        for i in range(0, len(frames), 5):
            got += reader.feed(frames[i:i + 5])
        assert got == [{**message, "attachment": attachment}, {"op": "out", "attachment": lure}]


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


def test_huge_pages_collapses_whole_anonymous_huge_pages_only(tmp_path):
    """The fork server backs its warm heap with 2 MiB pages (cheaper forks); only anonymous read-write ranges, in
    whole huge pages, and nothing at all where the kernel or the maps file says no."""
    import ctypes
    import mmap

    from app.sandbox.startup import HUGE_PAGE, huge_pages

    assert huge_pages(str(tmp_path / "missing")) == 0
    region = mmap.mmap(-1, 8 * HUGE_PAGE)
    region.write(b"x" * len(region))  # populated, as the warm heap is
    low = ctypes.addressof(ctypes.c_char.from_buffer(region))
    maps = tmp_path / "maps"
    maps.write_text(
        f"{low:x}-{low + 8 * HUGE_PAGE:x} rw-p 00000000 00:00 0\n"
        f"{low:x}-{low + 8 * HUGE_PAGE:x} r--p 00000000 00:00 0\n"  # not writable: skipped
        f"{low:x}-{low + 8 * HUGE_PAGE:x} rw-p 00000000 08:01 1234 /usr/lib/libfoo.so\n"  # a file's: skipped
        f"{low:x}-{low + HUGE_PAGE // 2:x} rw-p 00000000 00:00 0\n")  # under one huge page: skipped
    collapsed = huge_pages(str(maps))
    # the aligned part of the one anonymous range (7 or 8 huge pages), or 0 on a kernel without MADV_COLLAPSE
    assert collapsed in (0, 7 * HUGE_PAGE, 8 * HUGE_PAGE)
    assert region[:1] == b"x" and region[-1:] == b"x"  # the contents survive
    region.close()


def test_the_warm_up_reads_the_files_torchs_seeding_stack_names():
    """torch.manual_seed formats the stack (CUDA's lazy seeding): its files are read once in the server."""
    import linecache

    import torch

    from app.sandbox.startup import warm_up

    warm_up()
    for module in (torch.random, torch.cuda.random, torch.cuda):
        assert module.__file__ in linecache.cache


def test_a_hidden_module_file_formats_into_the_same_stack_without_being_looked_up_again(tmp_path, monkeypatch):
    """startup.forget_hidden_sources over project_sources: where the job's root hides a module's file, the
    formatted stack shows its frame without a source line either way; linecache then answers from an entry it never
    stats. A file the job can read, and one read already, are left as they are."""
    import importlib
    import linecache
    import sys

    from app.sandbox.startup import forget_hidden_sources, project_sources

    root = tmp_path / "proj"
    root.mkdir()
    for name in ("hidden_mod", "shown_mod", "cached_mod"):
        (root / f"{name}.py").write_text("import traceback\n\ndef stack():\n    return traceback.format_stack()\n")
    monkeypatch.syspath_prepend(str(root))
    hidden, shown, cached = (importlib.import_module(n) for n in ("hidden_mod", "shown_mod", "cached_mod"))
    try:
        linecache.getlines(cached.__file__)
        (root / "hidden_mod.py").unlink()  # as the job's root hides the project's files
        (root / "cached_mod.py").unlink()
        stacks = []
        for forget in (False, True):  # the same call, from the same line, before and after
            if forget:
                assert forget_hidden_sources(project_sources(str(root) + "/")) == 1
            stacks.append(hidden.stack())
        assert stacks[0] == stacks[1]
        assert stacks[0][-1].endswith('hidden_mod.py", line 4, in stack\n')  # no source line: the file is gone
        assert linecache.cache[hidden.__file__] == (0, None, [], hidden.__file__)
        assert linecache.cache[cached.__file__][1] is not None and shown.__file__ not in linecache.cache
        assert "return traceback.format_stack()" in shown.stack()[-1]  # a readable file still shows its line
    finally:
        for name in ("hidden_mod", "shown_mod", "cached_mod"):
            linecache.cache.pop(getattr(sys.modules.pop(name, None), "__file__", ""), None)
