"""The console's web adapter (Starlette, Jinja2 templates, vendored static files), its gRPC
and ClickHouse adapters, and its process entry point."""
