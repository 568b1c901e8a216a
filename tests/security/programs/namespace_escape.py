# MUST NOT: create namespaces (a user namespace would hand back capabilities), mount, chroot or pivot_root.
import ctypes, os

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x20000, 0x40000000
for name, call in (
    ("unshare(user)", lambda: libc.unshare(CLONE_NEWUSER)),
    ("unshare(mnt)", lambda: libc.unshare(CLONE_NEWNS)),
    ("unshare(net)", lambda: libc.unshare(CLONE_NEWNET)),
    ("setns", lambda: libc.setns(os.open("/proc/self/ns/mnt", os.O_RDONLY), 0)),
    ("mount tmpfs", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    ("mount proc", lambda: libc.mount(b"proc", b"/tmp", b"proc", 0, None)),
    ("remount / rw", lambda: libc.mount(None, b"/", None, 0x20, None)),
    ("chroot", lambda: libc.chroot(b"/tmp")),
    ("pivot_root", lambda: libc.syscall(155, b"/tmp", b"/tmp")),
    ("clone(newuser)", lambda: libc.syscall(56, CLONE_NEWUSER | 17, 0, 0, 0, 0)),
):
    rc = call()
    print("ESCAPED" if rc == 0 else "denied", name, ctypes.get_errno(), flush=True)
    if rc == 0 and name.startswith("clone"):
        os._exit(0)  # in the would-be child: leave at once
