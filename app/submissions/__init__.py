"""A submission's life: the live hub, the worker tier's hub, leases, history, views, regrades."""
