# MUST NOT: read /etc/shadow (or any host file under /etc beyond what the dynamic loader needs).
for path in ("/etc/shadow", "/etc/gshadow", "/etc/passwd", "/etc/hostname", "/etc/ssh/ssh_host_rsa_key"):
    try:
        with open(path) as f:
            print("LEAK", path, f.read(200))
    except OSError as exc:
        print("denied", path, type(exc).__name__)
