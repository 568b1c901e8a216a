"""The job process's descriptors to the fork server, and the one request the harness makes on them: the key.

    0 stdin (at EOF)   1 stdout   2 stderr
    3 payload pipe: the server writes the job's payload (8-byte length, then JSON) and keeps it open; later it
      writes the job's key there, once, when asked, and closes it
    4 report pipe: b"R" once isolated, then (grading mode) the one JSON report, which must echo the key
    5 status pipe: newline-separated tokens: "K" asks for the key, a number 0-255 is the exit code

The key authenticates the report. It never exists in the job's memory before the learner's code has run: the
harness asks for it only after the learner's code (and the probe, or in a job of several ranks every rank) has
finished. The server answers the first request only; a second one (the learner's code asked first) gets nothing
and the server discards the job's report (app/sandbox/jobstate.py).
"""

from __future__ import annotations

import os
import select
import struct
from typing import Callable

PAYLOAD_FD, REPORT_FD, STATUS_FD = 3, 4, 5
PAYLOAD_HEADER = struct.Struct(">Q")
KEY_REQUEST = b"\nK\n"  # the leading newline ends whatever else the learner's code may have written there
# seconds the harness waits for the key (the server answers at once; this only bounds a broken pipe's wait)
KEY_WAIT_S = 10.0
KEY_MAX = 128  # bytes


def read_payload(fd: int = PAYLOAD_FD) -> bytes:
    """Read the payload the server wrote (its length first); the pipe stays open for the key."""
    header = _read_exactly(fd, PAYLOAD_HEADER.size)
    (size,) = PAYLOAD_HEADER.unpack(header)
    return _read_exactly(fd, size)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            raise EOFError(f"the payload pipe closed {left} bytes early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def request_key(meanwhile: Callable[[], object] | None = None) -> str:
    """Ask the server for this job's key and return it ("" when it will not give one: asked before, or no pipe).

    meanwhile(): work done between the request and the reading of the answer, so that this process does not sit
    waiting for the server, which answers from its own loop (behind the other jobs it serves, on a busy host): a
    graded job encodes its report there (grade.run_grade). The answer may wait in the pipe meanwhile, where any code
    of this process could read it, as any could find the key in its memory once read: so it runs after the
    learner's code and the probe, as the request does."""
    try:
        os.write(STATUS_FD, KEY_REQUEST)
        asked = True
    except OSError:
        asked = False
    try:
        if meanwhile is not None:
            meanwhile()
        return _read_key() if asked else ""
    finally:
        close_payload()


def _read_key() -> str:
    data = b""
    try:
        while len(data) < KEY_MAX and not data.endswith(b"\n"):
            if not select.select([PAYLOAD_FD], [], [], KEY_WAIT_S)[0]:
                break
            chunk = os.read(PAYLOAD_FD, KEY_MAX)
            if not chunk:
                break
            data += chunk
    except OSError:
        return ""
    return data.strip().decode("ascii", "replace")


def close_payload() -> None:
    """Close the payload pipe (plain runs never ask for a key)."""
    try:
        os.close(PAYLOAD_FD)
    except OSError:
        pass


def no_key(meanwhile: Callable[[], object] | None = None) -> str:
    """The key source outside a sandboxed job (tests that call the harness directly): none."""
    if meanwhile is not None:
        meanwhile()
    return ""
