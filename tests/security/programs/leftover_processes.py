# MUST NOT: leave any process running after the job: children that ignore signals, a new process group,
# a subprocess of a system binary, and zombies are all gone when the job ends.
import ctypes, os, signal, subprocess, time

libc = ctypes.CDLL(None)
for i in range(4):
    if os.fork() == 0:
        if i % 2:
            os.setpgid(0, 0)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        libc.prctl(15, b"__MARKER__", 0, 0, 0)
        time.sleep(60)
        os._exit(0)
subprocess.Popen(["/usr/bin/sleep", "60"], start_new_session=True)
if os.fork() == 0:
    os._exit(0)  # a zombie nobody reaps
time.sleep(0.3)
print("children started", flush=True)
