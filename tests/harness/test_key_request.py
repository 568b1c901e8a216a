"""The key request (app/harness/channel.py) and the report that echoes the key (app/harness/grade.py run_grade).

A graded job asks the fork server for its key, encodes its report while the server answers, and puts the key in
front of the encoded report. Through the sandbox, every graded test's verdict depends on that key (tests/grading,
tests/security/test_job_isolation.py); here the request's order and the bytes, with the fork server's part played
by this process over real pipes.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

from app.core.config import ROOT
from app.harness import grade

CHILD = """
import os, sys
status_w, payload_r = int(sys.argv[1]), int(sys.argv[2])
os.dup2(status_w, 5)
os.dup2(payload_r, 3)
from app.harness import channel

def meanwhile():
    sys.stdin.readline()  # the test says go once it has the request: a request made after this never comes
    os.write(1, b"meanwhile\\n")  # and it answers only after this: a read of the answer before this never ends

print("key:" + channel.request_key(meanwhile), flush=True)
"""


def _wait_for(fd: int, want: bytes, timeout: float = 20.0) -> bytes:
    data = b""
    while want not in data:
        assert select.select([fd], [], [], timeout)[0], f"no {want!r} within {timeout} s; got {data!r}"
        chunk = os.read(fd, 4096)
        assert chunk, f"the pipe closed before {want!r}; got {data!r}"
        data += chunk
    return data


def test_the_key_is_asked_for_before_the_report_is_encoded_and_read_after():
    status_r, status_w = os.pipe()
    payload_r, payload_w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(status_w), str(payload_r)], cwd=ROOT,
                             pass_fds=(status_w, payload_r), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    os.close(status_w)
    os.close(payload_r)
    try:
        assert _wait_for(status_r, b"\nK\n") == b"\nK\n"  # the request, first of all
        child.stdin.write(b"go\n")
        child.stdin.flush()
        _wait_for(child.stdout.fileno(), b"meanwhile\n")
        os.write(payload_w, b"k3y\n")
        out, _ = child.communicate(timeout=20)
    finally:
        child.kill()
        for fd in (status_r, payload_w):
            os.close(fd)
    assert out.decode().splitlines()[-1] == "key:k3y"


def test_the_key_in_front_of_the_encoded_report_gives_the_bytes_the_whole_report_gave():
    class Shape:  # what json cannot encode goes as its str(), as before
        def __str__(self):
            return "torch.Size([32, 1])"

    report = {"exercise": "training-loop", "device": "cuda:0 (simulated on CPU)", "outcome": {"finished": True},
              "trace": {"events": {"move": [{"line": 19, "names": ["xb"], "shape": Shape()}]}, "losses": [0.5]},
              "probe": {"message": "ünïcode ✓"}, "timeline": None}
    for key in ("0123456789abcdef0123456789abcdef", ""):
        assert grade.with_nonce(key, grade.encode_report(report)) == grade.encode_report({"nonce": key, **report})
    assert grade.with_nonce("k", grade.encode_report({})) == grade.encode_report({"nonce": "k"})


def test_the_report_encodes_as_json_dumps_did_and_fails_as_it_did():
    """encode_report skips json's check for reference cycles; a value with one still fails as json.dumps fails."""
    import json

    import pytest

    report = {"trace": {"events": {"move": [{"line": 19, "shape": object, "value": float("nan")}]}, "losses": []},
              "probe": {"nested": [[[{"é": 1e300}]]]}}
    assert grade.encode_report(report) == json.dumps(report, default=str).encode()
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected"):
        grade.encode_report({"probe": {"value": cycle}})
