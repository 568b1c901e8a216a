# MUST NOT: kill processes outside the job with kill(-1) (every process it may signal) or by guessing host pids.
import os, signal

print("pid", os.getpid(), flush=True)
try:
    os.kill(-1, signal.SIGKILL)
    print("kill(-1) sent")
except ProcessLookupError:
    print("kill(-1): no other process to signal")
hits = 0
for pid in range(2, 40000):
    try:
        os.kill(pid, signal.SIGKILL)
        hits += 1
    except OSError:
        pass
print("host pids signalled", hits)
