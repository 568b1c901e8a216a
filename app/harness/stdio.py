"""The learner's sys.stdout and sys.stderr after their code ran: put back when broken, and said so in its words."""

from __future__ import annotations

import sys


def restore_streams() -> None:
    """Put back sys.stdout / sys.stderr where the learner's code replaced one with something that cannot be
    written to (None, a closed file), with one line saying so; a working replacement (io.StringIO) stays."""
    for name in ("stdout", "stderr"):
        stream, original = getattr(sys, name), getattr(sys, f"__{name}__")
        if stream is original:
            continue
        try:
            stream.flush()
            continue
        except Exception:  # None has no flush(), a closed file raises ValueError
            pass
        setattr(sys, name, original)
        try:
            sys.__stderr__.write(f"note: your program set sys.{name} to {stream!r}, which cannot be written to, so "
                                 f"what it printed there afterwards was lost; leave sys.{name} as it is, or put it "
                                 f"back with `sys.{name} = sys.__{name}__`.\n")
        except Exception:  # None has no flush(), a closed file raises ValueError
            pass


def flush_streams() -> None:
    """Flush stdout and stderr (restored first where the learner's code broke them)."""
    restore_streams()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # None has no flush(), a closed file raises ValueError
            pass
