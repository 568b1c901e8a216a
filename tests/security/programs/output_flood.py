# MUST NOT: flood 200 MB of output through to the caller; the output cap cuts it and stops the program.
import sys

line = "x" * 1023 + "\n"
for _ in range(200 * 1024):
    sys.stdout.write(line)
print("FINISHED FLOOD")
