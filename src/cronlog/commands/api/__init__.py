"""The api's side of the write path: a command checked, sent to its owner, its outcome
read back (stateless; any number of apis)."""
