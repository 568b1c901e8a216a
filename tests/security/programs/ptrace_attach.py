# MUST NOT: ptrace (attach to, or read the memory of) another process, e.g. its parent or pid 1.
import ctypes, os

libc = ctypes.CDLL(None, use_errno=True)
PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
for req, pid in ((PTRACE_ATTACH, os.getppid()), (PTRACE_ATTACH, 1), (PTRACE_SEIZE, 1), (PTRACE_TRACEME, 0)):
    rc = libc.ptrace(req, pid, 0, 0)
    print("ATTACHED" if rc == 0 else "denied", req, pid, ctypes.get_errno())
child = os.fork()
if child == 0:
    import time
    time.sleep(5)
    os._exit(0)
rc = libc.ptrace(PTRACE_ATTACH, child, 0, 0)
print("ATTACHED child" if rc == 0 else "denied child", ctypes.get_errno())
buf = ctypes.create_string_buffer(16)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local, remote = iovec(ctypes.addressof(buf), 16), iovec(0x400000, 16)
rc = libc.process_vm_readv(child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("VMREAD" if rc > 0 else "denied vmread", ctypes.get_errno())
os.kill(child, 9)
