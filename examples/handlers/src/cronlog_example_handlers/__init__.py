"""Example handlers for cronlog's workers."""
