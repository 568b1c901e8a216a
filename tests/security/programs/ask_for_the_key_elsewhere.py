# MUST NOT: reach the fork server from the check's "also runs without a GPU" copy of the program. The copy runs
# beside the graded run; if its key request reached the server it would win the key (this copy asks at once, the
# graded run only after 0.5 s) and the graded run's own request would get nothing.
import os
import select
import time

import torch

if torch.cuda.is_available():
    time.sleep(0.5)
os.write(5, b"\nK\n")
key = b""
if select.select([3], [], [], 5)[0]:
    key = os.read(3, 128).strip()
print("GOT_KEY", len(key), flush=True)
