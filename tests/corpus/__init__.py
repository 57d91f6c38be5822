"""The corpus: real third-party work (click's and pytest's own suites from their sdists, tox,
pytest-xdist, pip into a venv, git in linked worktrees, shell redirects) run in lanes of two
checkouts with a recorder watching, plus planted collisions. `score.py` prints its figures."""
