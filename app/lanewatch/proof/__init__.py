"""Proof: receipts and their seals, the gate, `lanewatch prove` and the git hooks that call the
gate. Core: imports no UI and no watcher."""
