# MUST NOT: get its report accepted after asking the fork server for the grader's key itself (the harness asks
# last; a second request gets nothing and the server discards the report).
import os
import select

os.write(5, b"\nK\n")
key = b""
if select.select([3], [], [], 5)[0]:
    key = os.read(3, 128).strip()
print("GOT_KEY", len(key), flush=True)
