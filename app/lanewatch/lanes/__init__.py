"""Lanes: checkout identity, namespace names, roots, owner stamps, locks, the ledger, claiming a
lane and running a command in it. Core: imports no UI and no watcher."""
