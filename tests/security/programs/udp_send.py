# MUST NOT: send a UDP datagram to a socket the test opened on the host's 127.0.0.1.
import socket

try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(5):
        s.sendto(b"HELLO FROM SANDBOX", ("127.0.0.1", __PORT__))
    print("SENT")
except OSError as exc:
    print("denied", type(exc).__name__, exc.errno)
