"""The Linux layer: every read of /proc, the mount table and the fanotify ABI, stdlib only."""
