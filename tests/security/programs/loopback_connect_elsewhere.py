# MUST NOT: with its own loopback (one process that asked for it, as DataLoader workers need), reach anything but
# that loopback: not a listener the test opened on the host's 127.0.0.1 (the job's 127.0.0.1 is another), not the
# host's other addresses, not the internet, over TCP or UDP. Its own loopback works: it talks to itself there.
import socket

own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
own.bind(("127.0.0.1", 0))
own.listen(1)
me = socket.create_connection(own.getsockname(), timeout=2)
peer, _ = own.accept()
me.sendall(b"ping")
print("own loopback", peer.recv(4).decode())
targets = [(socket.AF_INET, ("127.0.0.1", __PORT__)), (socket.AF_INET6, ("::1", __PORT__)),
           (socket.AF_INET, ("8.8.8.8", 53)), (socket.AF_INET, ("10.0.2.2", 80))]
targets += [(socket.AF_INET, (address, __PORT__)) for address in __HOST_ADDRESSES__]
for family, address in targets:
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        s.sendall(b"HELLO FROM A LOOPBACK JOB")
        print("CONNECTED", address)
    except OSError as exc:
        print("denied", address, type(exc).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"HELLO UDP", ("127.0.0.1", __UDP_PORT__))
    print("udp sent to the job's own loopback")
except OSError as exc:
    print("udp denied", type(exc).__name__)
for family, kind in ((socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW)):
    try:
        socket.socket(family, kind, 0)
        print("OPENED", family, kind)
    except OSError as exc:
        print("raw denied", type(exc).__name__)
print("interfaces", [name for _, name in socket.if_nameindex()])
