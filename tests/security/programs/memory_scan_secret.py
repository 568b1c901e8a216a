# MUST NOT: find the app's secret key anywhere in its own memory (the fork server's memory, which every job
# inherits, must never have held it).
import ctypes

# The secret's halves arrive reversed and are never joined here, so the whole secret only shows up in memory if
# the sandbox leaked it. A control string that this program does build proves the scan sees the heap.
h1, h2 = "__H1R__"[::-1].encode(), "__H2R__"[::-1].encode()
c1, c2 = b"control-", b"".join([b"x7", b"q9"])
control = bytes(bytearray(c1) + bytearray(c2))  # kept alive on purpose


def count(chunk, first, second):
    n, i = 0, chunk.find(first)
    while i >= 0:
        n += chunk[i + len(first): i + len(first) + len(second)] == second
        i = chunk.find(first, i + 1)
    return n


found = found_control = scanned = 0
with open("/proc/self/maps") as maps:
    regions = [line.split() for line in maps]
for parts in regions:
    name = parts[5] if len(parts) > 5 else ""
    if not parts[1].startswith("r") or name not in ("", "[heap]", "[stack]"):
        continue  # anonymous memory only: file mappings past EOF would raise SIGBUS
    start, end = (int(x, 16) for x in parts[0].split("-"))
    chunk = ctypes.string_at(start, end - start)
    scanned += len(chunk)
    found += count(chunk, h1, h2)
    found_control += count(chunk, c1, c2)
print("SCAN_DONE secret", found, "control", found_control, "scanned MiB", scanned >> 20)
