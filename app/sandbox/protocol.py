"""Framing between the runner and the fork server: 4-byte big-endian length, then one JSON object."""

from __future__ import annotations

import json
import struct

HEADER = struct.Struct(">I")
# bytes; a frame is one output line, one job request (<= 64 KiB source + grading spec) or one result
MAX_FRAME = 16 << 20


def encode(message: dict) -> bytes:
    """Return one frame holding message."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


class FrameReader:
    """Split a byte stream into decoded messages; feed() whatever arrived, get back every complete frame."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict]:
        """Add data; return the messages now complete."""
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
            if len(self._buf) < HEADER.size + size:
                break
            body = bytes(self._buf[HEADER.size : HEADER.size + size])
            del self._buf[: HEADER.size + size]
            out.append(json.loads(body))
        return out
