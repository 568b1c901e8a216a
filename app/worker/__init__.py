"""The worker tier's side of COURSE_RUNNER=celery: `course worker` runs jobs from Redis in a warm sandbox.

service.py holds one worker process's sandbox (a LocalRunner of its own, in its own event loop thread)
and runs the two kinds of task; leasing.py renews the leases of its running jobs, reports the worker to Redis,
and sweeps for jobs whose worker died (`course sweep` runs the same sweep once).
"""
