"""A loaded machine for tests whose figures must not depend on it (the simulated clock's device-side times)."""

from __future__ import annotations

import contextlib
import subprocess
import sys


@contextlib.contextmanager
def busy_cpu():
    """Keep one core spinning in another process while the block runs."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        burner.kill()
        burner.wait()
