# MUST NOT: take more memory than the group's limit by growing one rank without bound; it is killed and the group
# ends with the memory limit named.
import os, time

keep = []
if os.environ["RANK"] == "1":
    while True:
        keep.append(bytearray(32 << 20))
        for i in range(0, len(keep[-1]), 4096):
            keep[-1][i] = 1
time.sleep(60)
