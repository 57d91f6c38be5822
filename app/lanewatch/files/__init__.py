"""Watching files: the first walk of every root and the watchdog tail of changes."""
