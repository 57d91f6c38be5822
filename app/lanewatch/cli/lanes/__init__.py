"""Commands that start, name and show lanes: `id`, `run` (`run_fast.py`: its usual forms
without click), `roots`, `status`, `ports`, `files` and `dash` (the dashboard).

Empty on purpose: `lanewatch run` imports this package on its way to `run_fast`."""
