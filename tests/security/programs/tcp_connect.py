# MUST NOT: reach a TCP listener the test opened on the host's 127.0.0.1.
import socket

for family, addr in ((socket.AF_INET, ("127.0.0.1", __PORT__)), (socket.AF_INET6, ("::1", __PORT__))):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(addr)
        s.sendall(b"HELLO FROM SANDBOX")
        print("CONNECTED", addr)
    except OSError as exc:
        print("denied", addr, type(exc).__name__, exc.errno)
