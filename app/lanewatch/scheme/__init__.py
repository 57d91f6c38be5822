"""The lane scheme: identity, names, roots, stamps, locks, ledger. Imports no UI or watcher."""
