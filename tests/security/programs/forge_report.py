# MUST NOT: find the key that authenticates its job's report (in its payload, its inherited frames or objects),
# nor get a forged report accepted with whatever it found.
import gc
import json
import os
import re
import sys

HEX = re.compile(r"[0-9a-f]{32}")
found = set()


def look(value, depth=0):
    if isinstance(value, str) and HEX.fullmatch(value):
        found.add(value)
    elif depth < 4 and isinstance(value, dict):
        for k, v in list(value.items()):
            if k in ("nonce", "key"):
                found.add(str(v))
            look(v, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for v in list(value):
            look(v, depth + 1)


frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        look(value)
    frame = frame.f_back
gc.unfreeze()
for obj in gc.get_objects():
    if isinstance(obj, dict):
        look(obj, 3)
found.discard("None")
print("CANDIDATES", sorted(found), flush=True)
forged = {"nonce": sorted(found)[0] if found else "", "outcome": {"finished": True, "exception": None,
                                                                   "exit_code": 0}, "probe": {}, "trace": {}}
try:
    os.write(4, json.dumps(forged).encode())
    os.close(4)
except OSError:
    pass
os._exit(0)
