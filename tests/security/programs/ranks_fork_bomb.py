# MUST NOT: exhaust the host's processes from one rank of a group: the group's pids limit stops the bomb, the other
# rank is stopped with it, and every process of the group is reaped.
import ctypes, os, time

if os.environ["RANK"] == "1":
    ctypes.CDLL(None).prctl(15, b"__MARKER__b", 0, 0, 0)  # PR_SET_NAME: lets the test look for survivors
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
ctypes.CDLL(None).prctl(15, b"__MARKER__w", 0, 0, 0)
time.sleep(60)
