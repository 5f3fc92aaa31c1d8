"""The partition owner's side of the write path: the fenced loop that reads, decides,
commits and applies (docs/architecture.md)."""
