# MUST NOT: write outside its private tmp: system directories, /, /proc/sys, the cgroup tree.
import os

for path in ("/etc/sbx_probe", "/usr/sbx_probe", "/usr/bin/sbx_probe", "/bin/sbx_probe", "/var/sbx_probe", "/sbx_probe",
             "/proc/sys/kernel/hostname", "/sys/fs/cgroup/pids/cgroup.procs", "/dev/sbx_probe", "/var/log/sbx_probe"):
    try:
        with open(path, "a") as f:
            f.write("x")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, type(exc).__name__)
for d in ("/tmp", "/var/tmp", "/dev/shm"):
    with open(f"{d}/inside_ok", "w") as f:  # allowed: the job's own tmpfs
        f.write("ok")
print("tmp ok")
