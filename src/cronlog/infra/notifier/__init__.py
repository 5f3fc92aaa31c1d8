"""The notifier's delivery adapters (docs/alerts.md, "Delivery: webhooks, Slack and e-mail"):
one AlertSender (notifications/ports.py) per kind of channel. Webhook and Slack requests go
through the egress fence (outbound/), e-mail through the operator's SMTP server; what an
answer means is notifications/outcomes.py's to say."""
