# MUST NOT: use kernel interfaces the seccomp filter denies: bpf, keyctl, io_uring, perf_event_open, userfaultfd,
# kexec, kernel modules, personality; clone3 must report ENOSYS (so glibc falls back to inspectable clone).
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
calls = {"bpf": (321, 0, 0, 0), "keyctl": (250, 0, 0, 0), "add_key": (248, 0, 0, 0), "io_uring_setup": (425, 8, 0),
         "io_uring_enter": (426, 0, 0, 0), "perf_event_open": (298, 0, 0, -1, -1, 0), "userfaultfd": (323, 0),
         "kexec_load": (246, 0, 0, 0, 0), "init_module": (175, 0, 0, 0), "finit_module": (313, 0, 0, 0),
         "delete_module": (176, b"ext4", 0), "personality": (135, 0x0040000), "clone3": (435, 0, 0),
         "process_vm_writev": (311, 1, 0, 0, 0, 0, 0), "open_by_handle_at": (304, 0, 0, 0), "syslog": (103, 3, 0, 0),
         "reboot": (169, 0, 0, 0, 0), "swapon": (167, b"/tmp/x", 0), "acct": (163, b"/tmp/x")}
for name, (nr, *args) in calls.items():
    rc = libc.syscall(nr, *args)
    print("ALLOWED" if rc >= 0 else "denied", name, rc, ctypes.get_errno())
