"""The notifier's pure core (issue 37, docs/alerts.md): which alerts a job's rule wants and
how many get through (rules.py), what goes on the wire (rendering.py), how a webhook is
signed (signing.py), when a failed delivery is tried again (retry_plan.py) and which
pending delivery is sent next, fairly across tenants (fair_queue.py); their shared types in
model.py. No I/O, no clock reads, no Kafka, SQL, gRPC or HTTP types: `now` is passed in."""
