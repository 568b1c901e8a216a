# MUST NOT: take the sandbox down with output and a report that re-encode past the largest frame the runner
# reads (invalid UTF-8 on stdout, a report of emoji), which once lost the server and every job with it.
import os

os.write(1, b"\xff" * 1_000_000)
body = b'{"x": "' + "\U0001F600".encode() * ((4 << 20) // 4 - 16) + b'"}'
view = memoryview(body)
while view:
    view = view[os.write(4, view):]
os.close(4)
