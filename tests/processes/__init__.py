"""Tests that start real processes: `lanewatch run` owners, the CLI, git, forks, the engine's
child, other users. Marked `processes` (tests/conftest.py), but for the fast tests of the few
files `MIXED` names there."""
