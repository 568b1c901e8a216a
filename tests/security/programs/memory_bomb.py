# MUST NOT: allocate more than the memory limit in one go (8 GiB); it must fail, not take the host down.
b = bytearray(8 << 30)
print("GOT 8 GiB", len(b))
