# MUST NOT: bypass the seccomp filter through the x32 system-call ABI (syscall numbers with bit 30 set), which
# a filter that only checks x86_64 numbers would let through.
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
print("trying", flush=True)
fd = libc.syscall(0x40000000 | 41, 2, 1, 0)  # x32 socket(AF_INET, SOCK_STREAM, 0)
print("OPENED" if fd >= 0 else "denied", fd, ctypes.get_errno())
