# MUST NOT: see or read anything in /root (root's home) except the read-only Python installation bound there.
import json, os

print("ROOT_ENTRIES", json.dumps(sorted(os.listdir("/root")) if os.path.isdir("/root") else []))
for path in ("/root/.bashrc", "/root/.profile", "/root/.bash_history", "/root/.ssh/id_rsa",
             "/root/.ssh/authorized_keys", "/root/.python_history", "/root/.cache", "/root/.config", "/home"):
    try:
        if os.path.isdir(path):
            print("LEAK dir", path, os.listdir(path))
        else:
            with open(path) as f:
                print("LEAK", path, f.read(100))
    except OSError as exc:
        print("denied", path, type(exc).__name__)
