"""The console's page logic: what each page shows and what its actions do, through small
ports (the gRPC api as a client, the run history for charts). The web adapter, templates
and process entry point are in cronlog.infra.console."""
