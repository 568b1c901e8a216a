# MUST NOT: see the host's processes, hostname, devices or /sys: its /proc shows only the job's own pids.
import json, os, socket

print("VIEW", json.dumps({"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
                          "hostname": socket.gethostname(), "sys": os.path.exists("/sys/fs/cgroup"),
                          "dev": sorted(os.listdir("/dev")), "root": sorted(os.listdir("/")),
                          "mem": os.path.exists("/dev/mem"), "kmsg": os.path.exists("/dev/kmsg")}))
for path in ("/dev/mem", "/dev/kmsg", "/dev/vda", "/proc/kcore", "/proc/sysrq-trigger"):
    try:
        with open(path, "rb") as f:
            print("LEAK", path, f.read(16))
    except OSError as exc:
        print("denied", path, type(exc).__name__)
