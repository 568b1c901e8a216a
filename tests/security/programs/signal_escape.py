# MUST NOT: escape its limits by changing them: rlimits cannot be raised, priority cannot be raised, and the
# cgroup files are not reachable.
import os, resource

for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE"):
    res = getattr(resource, name)
    soft, hard = resource.getrlimit(res)
    try:
        resource.setrlimit(res, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print("RAISED", name)
    except (ValueError, OSError) as exc:
        print("denied", name, type(exc).__name__)
try:
    os.nice(-10)
    print("RAISED priority")
except OSError as exc:
    print("denied nice", exc.errno)
print("cgroup", open("/proc/self/cgroup").read().split())
