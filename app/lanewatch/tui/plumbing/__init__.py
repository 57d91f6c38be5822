"""How things reach the UI thread: every message, the buffer of the engine's changes, and the
one-shot timer that always fires."""
