"""Requests to URLs a tenant named (an `http` job, an alert channel): the egress fence that
decides where they may go (policy.py, pure) and the POST that connects only to an address
the fence admitted (pinned_http.py; docs/outbound.md)."""
