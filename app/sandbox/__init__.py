"""Run untrusted learner code: fork server, per-job isolation, limits, output capture.

Imported by the fork server and (through app.sandbox.harness) inside every job, so it stays empty: import the
module you need (limits, protocol, host, ...). Nothing here imports app.runner, app.web or app.grading.
"""
