# MUST NOT: outlive the group: a rank's daemon in a new session, and a child that ignores SIGTERM, are gone when
# the job ends, though every rank exits 0.
import ctypes, os, signal, time

libc = ctypes.CDLL(None)
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    libc.prctl(15, b"__MARKER__", 0, 0, 0)
    time.sleep(60)
    os._exit(0)
time.sleep(0.2)
print("left a child behind", flush=True)
