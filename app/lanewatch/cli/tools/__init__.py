"""Tools around lanes: `demo`, `drill`, `audit`, and `completion` (the shell's script)."""
