"""Comments under lessons and their moderation."""
