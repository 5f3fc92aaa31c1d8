"""What operators watch: every role's metrics (catalogue.py), its /metrics, /healthz and
/readyz (server.py), and its log format (json_logs.py). Nothing here does I/O at import."""
