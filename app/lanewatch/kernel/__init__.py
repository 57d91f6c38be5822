"""Kernel attribution: fanotify names the writer of every write in the roots and shared temp."""
