"""The ASGI middleware the site runs every request through."""
