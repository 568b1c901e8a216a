# MUST NOT: find anything of another learner's job: no job objects of the fork server in inherited frames or in
# objects (their output, code, payloads, keys), and not another job's printed token anywhere in its own memory.
import ctypes
import gc
import sys

# The victim's token arrives as reversed halves that are never joined here, so the whole token only shows up in
# memory if the sandbox leaked it. A control string this program does build proves each search sees what it scans.
h1, h2 = "__H1R__"[::-1], "__H2R__"[::-1]
b1, b2 = h1.encode(), h2.encode()
c1, c2 = "ctl-", "".join(["k8", "w3"])
control = "".join([c1, c2])  # kept alive on purpose


def holds(text, first, second):
    i = text.find(first)
    while i >= 0:
        if text.startswith(second, i + len(first)):
            return True
        i = text.find(first, i + 1)
    return False


def strings_in(value, depth=0):
    if isinstance(value, (str, bytes)):
        yield value if isinstance(value, str) else value.decode("utf-8", "replace")
    elif depth < 4 and isinstance(value, dict):
        for k, v in list(value.items()):
            yield from strings_in(k, depth + 1)
            yield from strings_in(v, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        for v in list(value):
            yield from strings_in(v, depth + 1)


SERVER_TYPES = {"ForkServer", "RunningJob", "JobQueue"}
server_objects = token_in_objects = control_in_objects = 0
# 1. every frame this process inherited, and every object the collector knows (frozen ones too)
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        server_objects += type(value).__name__ in SERVER_TYPES and bool(getattr(value, "jobs", None)
                                                                        or getattr(value, "text", None))
        for text in strings_in(value):
            token_in_objects += holds(text, h1, h2)
            control_in_objects += holds(text, c1, c2)
    frame = frame.f_back
gc.unfreeze()
for obj in gc.get_objects():
    name = type(obj).__name__
    if name == "RunningJob" or (name == "ForkServer" and (obj.jobs or obj.waiting)):
        server_objects += 1
    if isinstance(obj, (dict, list, tuple)):
        for text in strings_in(obj, 3):
            token_in_objects += holds(text, h1, h2)
            control_in_objects += holds(text, c1, c2)

# 2. every anonymous memory region of this process
control_b = control.encode()
token_in_memory = control_in_memory = 0
with open("/proc/self/maps") as maps:
    regions = [line.split() for line in maps]
for parts in regions:
    name = parts[5] if len(parts) > 5 else ""
    if not parts[1].startswith("r") or name not in ("", "[heap]", "[stack]"):
        continue  # anonymous memory only: file mappings past EOF would raise SIGBUS
    start, end = (int(x, 16) for x in parts[0].split("-"))
    chunk = ctypes.string_at(start, end - start)
    token_in_memory += holds(chunk, b1, b2)
    control_in_memory += holds(chunk, control_b[:4], control_b[4:])
print("STEAL server_objects", server_objects, "token_objects", token_in_objects, "token_memory", token_in_memory,
      "control_objects", control_in_objects, "control_memory", control_in_memory)
