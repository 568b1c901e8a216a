"""The placement tracer: the facts a learner's program leaves, per line."""
