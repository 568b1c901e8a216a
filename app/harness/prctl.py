"""prctl(2) for the harness's own processes: the launcher makes itself undumpable, a copy the spare forks dies with
the spare. Its own module, below both (launch.py, elsewhere.py), which would import each other through grade.py
otherwise; the harness imports nothing of the sandbox's jail (app/sandbox/isolation.py has the jail's own)."""

from __future__ import annotations

import ctypes

# the options the harness uses (<linux/prctl.h>)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


def prctl(option: int, value: int) -> None:
    """prctl(2) with one argument; raise OSError with the kernel's errno when it refuses."""
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")
