"""cronlog's development tools: the local servers (`stack`), the whole service on this
machine (`cronlog-dev run`, what `make run` calls) and the benchmark (`bench`).

A distribution of its own (cronlog-dev, under dev/ in the repository), so that
`pip install cronlog` brings the service and its client but none of this. It depends on
cronlog; cronlog never imports it.
"""
