"""The long journeys (marked `slow`): the benchmark's smoke run and a fork storm under the
recorder. `.ci/run` runs every `slow` test in a job of its own (`-m slow`), beside the rest;
the journeys of the dashboard (the wheel installed, churn) stay with it in tests/tui/."""
