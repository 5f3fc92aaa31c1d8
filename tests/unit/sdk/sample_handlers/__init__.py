"""Handlers as a user's package would write them, for the loader's tests."""
