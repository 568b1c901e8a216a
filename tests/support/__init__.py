"""What tests and benchmarks share: the Redis and PostgreSQL servers, the site's server and its learners, the
worker tier, the fidelity corpus. bench/ imports these and nothing else of tests/."""
