# MUST NOT: from one job with its own loopback, reach another such job running beside it: not its TCP listener on
# its 127.0.0.1, not its abstract AF_UNIX socket (abstract names belong to a network namespace), not the socket file
# in its /tmp.
import os, socket

for name, family, address in (("tcp", socket.AF_INET, ("127.0.0.1", __PORT__)),
                              ("abstract", socket.AF_UNIX, "\0__ABSTRACT__"),
                              ("file", socket.AF_UNIX, "/tmp/__ABSTRACT__.sock")):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        s.sendall(b"HELLO NEIGHBOUR")
        print("CONNECTED", name)
    except OSError as exc:
        print("denied", name, type(exc).__name__)
print("socket file visible" if os.path.exists("/tmp/__ABSTRACT__.sock") else "no socket file")
