# MUST NOT: use more than its CPU allowance by spinning on 64 threads (nor starve the host: one core at most).
import threading

def spin():
    while True:
        pass

started = 0
for _ in range(64):
    try:
        threading.Thread(target=spin, daemon=True).start()
        started += 1
    except RuntimeError:
        break
print("threads started", started, flush=True)
spin()
