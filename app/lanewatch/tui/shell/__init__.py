"""The app's lifecycle and what it owns beside `tui/app.py`: the confirm-then-act flows,
notices, the staleness watchdog, leaving on a signal, the clipboard, the command palette."""
