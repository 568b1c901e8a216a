# MUST NOT: hang waiting for input: stdin is at end-of-file, so reading returns at once.
import sys

data = sys.stdin.read()
print("READ", repr(data))
line = input()  # raises EOFError immediately
print("NEVER", line)
