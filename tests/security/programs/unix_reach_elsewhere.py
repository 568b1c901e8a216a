# MUST NOT: from an ordinary job, reach a Unix socket that is not the job's own: not an abstract name the host
# listens on (abstract names belong to a network namespace), not a socket file anywhere in the job's root outside its
# own tmpfs. Its own Unix sockets work: a DataLoader's workers hand their batches back over them.
import os
import socket
import stat

try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect("\0__ABSTRACT__")
    s.sendall(b"HELLO HOST")
    print("CONNECTED host abstract")
except OSError as exc:
    print("denied host abstract", type(exc).__name__)

own = 0
for address in ("\0own-__ABSTRACT__", "/tmp/own.sock"):  # as multiprocessing's resource_sharer makes them
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(1)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(address)
    conn, _ = server.accept()
    client.sendall(b"x")
    own += conn.recv(1) == b"x"
print("own sockets", own)

OWN = ("/tmp", "/var/tmp", "/dev/shm", "/proc", "/sys")  # its own tmpfs; /proc shows only its own processes
walked, pending = 0, ["/"]
while pending:
    top = pending.pop()
    try:
        entries = list(os.scandir(top))
    except OSError:
        continue
    for entry in entries:
        walked += 1
        if entry.is_symlink():
            continue
        if entry.is_dir():
            if entry.path not in OWN:
                pending.append(entry.path)
        elif not entry.is_file():  # a socket, a fifo or a device node: which one, from the inode
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISSOCK(mode):
                print("SOCKET_FILE", entry.path)
                try:
                    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    c.settimeout(2)
                    c.connect(entry.path)
                    print("CONNECTED", entry.path)
                except OSError as exc:
                    print("denied", entry.path, type(exc).__name__)
print("WALKED", walked)
