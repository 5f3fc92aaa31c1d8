"""The worker fleet as people see it: what a worker announces of itself (announcement.py),
the announcing loop (announcer.py) and the api's record of the live ones (live_workers.py);
docs/workers.md."""
