"""Allow `python -m app.cli ...` (same as the `course` script)."""

from app.cli import main

main()
