# MUST NOT: exhaust the host's processes: a fork bomb is stopped by the pids limit and every fork is reaped.
import ctypes, os, time

ctypes.CDLL(None).prctl(15, b"__MARKER__", 0, 0, 0)  # PR_SET_NAME: lets the test look for survivors
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
