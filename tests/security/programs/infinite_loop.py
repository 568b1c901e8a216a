# MUST NOT: run forever: the CPU limit stops an endless loop.
while True:
    pass
