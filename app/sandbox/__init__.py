"""Run untrusted learner code: fork server, per-job isolation, limits, output capture.

Imported by the fork server, so it stays empty: import the module you need (job_limits, protocol, host_facts,
...). What runs inside each job is app.harness. Nothing here imports app.runner, app.web or app.grading.
"""
