# MUST NOT: flood 200 MB of output through the launcher; the group's output cap cuts it and stops every rank.
import os, sys, time

if os.environ["RANK"] == "0":
    time.sleep(60)
line = "x" * 1023 + "\n"
for _ in range(200 * 1024):
    sys.stdout.write(line)
print("FINISHED FLOOD")
