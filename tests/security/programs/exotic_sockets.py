# MUST NOT: open AF_VSOCK, AF_NETLINK, AF_PACKET (or any non-AF_UNIX) socket; a network namespace alone still
# allows vsock and netlink, so the seccomp filter must refuse them.
import socket

families = {"AF_VSOCK": 40, "AF_NETLINK": 16, "AF_PACKET": 17, "AF_INET": 2, "AF_INET6": 10, "AF_BLUETOOTH": 31,
            "AF_ALG": 38, "AF_KEY": 15, "AF_XDP": 44}
for name, fam in families.items():
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW):
        try:
            s = socket.socket(fam, kind, 0)
            print("OPENED", name, kind)
            s.close()
        except OSError as exc:
            print("denied", name, kind, exc.errno)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # allowed: local IPC only, inside the job
print("unix ok")
