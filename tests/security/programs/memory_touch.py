# MUST NOT: use more memory than the limit by touching it page by page; the cgroup stops it.
chunks = []
for i in range(64):
    chunks.append(b"\x01" * (64 << 20))
    print("touched MiB", (i + 1) * 64, flush=True)
print("SURVIVED 4 GiB")
