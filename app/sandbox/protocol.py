"""Framing between the runner and the fork server: 4-byte big-endian length, then one JSON object.

A frame may carry an attachment after its JSON: bytes that went through the server unread (a graded job's report,
which the runner decodes and checks: jobstate.read_report). Its length word then has ATTACHED set, and the JSON's
own length follows it; the reader hands the bytes over under ATTACHMENT, a value no JSON decodes to (bytes)."""

from __future__ import annotations

import json
import struct

HEADER = struct.Struct(">I")
# bytes; a frame is one output line, one job request (<= 64 KiB source + grading spec) or one result
MAX_FRAME = 16 << 20
# the length word's top bit: this frame has an attachment (MAX_FRAME leaves the bit free)
ATTACHED = 1 << 31
# the key a frame's attachment is handed over under, as bytes
ATTACHMENT = "attachment"


def encode(message: dict, attachment: bytes | None = None) -> bytes:
    """Return one frame holding message, and attachment's bytes after it as they are."""
    body = json.dumps(message, separators=(",", ":")).encode()
    if attachment is None:
        return HEADER.pack(len(body)) + body
    return b"".join((HEADER.pack(ATTACHED | (HEADER.size + len(body) + len(attachment))), HEADER.pack(len(body)),
                     body, attachment))


def frame_size(frame: bytes) -> int:
    """The size of an encoded frame's body, as the reader will check it against MAX_FRAME."""
    return HEADER.unpack_from(frame)[0] & ~ATTACHED


class FrameReader:
    """Split a byte stream into decoded messages; feed() whatever arrived, get back every complete frame."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict]:
        """Add data; return the messages now complete (a frame's attachment under ATTACHMENT, as bytes)."""
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            (word,) = HEADER.unpack_from(self._buf)
            size = word & ~ATTACHED
            if size > MAX_FRAME:
                raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
            if len(self._buf) < HEADER.size + size:
                break
            body = bytes(self._buf[HEADER.size : HEADER.size + size])
            del self._buf[: HEADER.size + size]
            out.append(_decode(body, attached=bool(word & ATTACHED)))
        return out


def _decode(body: bytes, *, attached: bool) -> dict:
    if not attached:
        return json.loads(body)
    (size,) = HEADER.unpack_from(body)
    if size > len(body) - HEADER.size:
        raise ValueError(f"a frame's JSON of {size} bytes is longer than the frame")
    message = json.loads(body[HEADER.size : HEADER.size + size])
    message[ATTACHMENT] = body[HEADER.size + size :]
    return message
