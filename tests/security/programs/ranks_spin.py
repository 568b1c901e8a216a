# MUST NOT: use more than the group's CPU allowance, with both ranks spinning on threads.
import threading

def spin():
    while True:
        pass

for _ in range(16):
    threading.Thread(target=spin, daemon=True).start()
spin()
