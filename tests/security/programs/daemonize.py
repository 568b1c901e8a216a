# MUST NOT: leave a daemon behind that outlives the job (double fork + setsid, ignoring SIGHUP/SIGTERM) and later
# does something (writes a marker).
import ctypes, os, signal, sys, time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ctypes.CDLL(None).prctl(15, b"__MARKER__", 0, 0, 0)
        os.closerange(0, 3)
        time.sleep(5)  # tests/security/test_hostile.py: longer than the test's wait for it to be gone
        with open("/tmp/__MARKER__", "w") as f:
            f.write("the daemon survived")
        os._exit(0)
    os._exit(0)
time.sleep(0.2)
print("parent exits, daemon sleeping", flush=True)
