"""The `cronlog` command's client commands (jobs, runs, preview, calendars, jobs import):
a shell over cronlog.client. The process roles and operator tools are
infra/entrypoints/."""
