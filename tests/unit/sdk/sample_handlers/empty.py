"""A module without handlers."""

VALUE = 1
