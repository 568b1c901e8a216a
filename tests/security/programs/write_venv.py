# MUST NOT: write into the venv, site-packages (a .pth there would run in every later process), the Python
# installation, or the project directory.
import os, sys, sysconfig

targets = [os.path.join(sysconfig.get_paths()["purelib"], "sbx_evil.pth"), os.path.join(sys.prefix, "bin", "sbx_evil"),
           os.path.join(sys.base_prefix, "lib", "sbx_evil"), "__PROJECT_ROOT__/sbx_evil",
           "__PROJECT_ROOT__/.venv/sbx_evil"]
for path in targets:
    try:
        with open(path, "w") as f:
            f.write("import os; os.system('echo pwned')\n")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, type(exc).__name__)
    try:
        os.chmod(os.path.dirname(path), 0o777)
        print("CHMOD", os.path.dirname(path))
    except OSError as exc:
        print("denied chmod", type(exc).__name__)
