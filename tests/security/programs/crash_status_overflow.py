# MUST NOT: take the sandbox down by writing a huge number on the status pipe (fd 5), which once overflowed the
# server's wait-status conversion and failed every running job.
import os

os.write(5, b"99999999")
print("wrote the status pipe")
