"""The dashboard's screens: main (three views, and its parts: `main_*.py`), incident timeline,
files, help, the message log, the dialogs. They read the `DashboardState` the app hands them
and ask the app by a message; they never import `tui/app.py` or `shell/` (a contract)."""
