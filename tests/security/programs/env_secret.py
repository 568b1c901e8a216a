# MUST NOT: see the app's environment or its secret key (COURSE_SECRET_KEY) through os.environ or /proc.
import os

print("ENV", dict(os.environ))
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                print("PROC", pid, what, f.read().replace(b"\0", b" ")[:2000])
        except OSError as exc:
            print("denied", pid, what, type(exc).__name__)
