"""The site's routers, one per area."""
