# MUST NOT: read the project's database (the test creates a SQLite file with a secret row outside the sandbox).
import os, sqlite3

for path in ("__DB_PATH__", "__PROJECT_ROOT__/var/course.db"):
    try:
        with open(path, "rb") as f:
            print("LEAK bytes", path, f.read()[:4000])
    except OSError as exc:
        print("denied", path, type(exc).__name__)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        print("LEAK rows", con.execute("select * from secrets").fetchall())
    except sqlite3.Error as exc:
        print("denied sqlite", path, exc)
print("tmp sees", os.listdir("/tmp"))
