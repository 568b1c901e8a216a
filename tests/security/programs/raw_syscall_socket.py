# MUST NOT: open an AF_INET socket or connect to the host's 127.0.0.1 listener through raw syscalls via ctypes
# (bypassing Python's socket module).
import ctypes, socket, struct

libc = ctypes.CDLL(None, use_errno=True)
SYS_socket, SYS_connect = 41, 42
fd = libc.syscall(SYS_socket, socket.AF_INET, socket.SOCK_STREAM, 0)
print("socket() ->", fd, "errno", ctypes.get_errno())
if fd >= 0:
    addr = struct.pack("!HH4s8x", socket.AF_INET, __PORT__, socket.inet_aton("127.0.0.1"))
    addr = struct.pack("=H", socket.AF_INET) + addr[2:]
    buf = ctypes.create_string_buffer(addr)
    rc = libc.syscall(SYS_connect, fd, buf, len(addr))
    print("CONNECTED" if rc == 0 else "connect failed", ctypes.get_errno())
fd6 = libc.syscall(SYS_socket, socket.AF_INET6, socket.SOCK_DGRAM, 0)
print("socket6() ->", fd6, "errno", ctypes.get_errno())
