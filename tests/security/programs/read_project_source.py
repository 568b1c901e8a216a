# MUST NOT: read the project's source (app/, pyproject.toml) or list the project directory.
import os

root = "__PROJECT_ROOT__"
try:
    print("PROJECT_ENTRIES", sorted(os.listdir(root)))
except OSError as exc:
    print("denied listdir", type(exc).__name__)
for rel in ("app/core/config.py", "pyproject.toml", "app/core/security.py", "app/sandbox/server.py", ".git/config"):
    try:
        with open(os.path.join(root, rel)) as f:
            print("LEAK", rel, f.read(300))
    except OSError as exc:
        print("denied", rel, type(exc).__name__)
try:
    import app.core.config  # only modules the fork server imported are in memory; the files are not visible
    print("LEAK import app.core.config", app.core.config.DEFAULT_SECRET)
except Exception as exc:
    print("denied import", type(exc).__name__)
