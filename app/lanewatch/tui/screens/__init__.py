"""The dashboard's screens: main (three views), incident timeline, help, confirm, trash."""
