"""The app's lifecycle and what it owns beside `tui/app.py`: the feed of changes and its
staleness watchdog, the answers to what screens ask, the confirm-then-act flows, leaving on a
signal, the clipboard, the command palette. Screens and widgets never import it (a contract)."""
