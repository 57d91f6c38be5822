"""`lanewatch`'s entry point (the console script and `python -m lanewatch`): `lanewatch run`
in its usual forms starts without click (cli/lanes/run_fast.py), and so does `lanewatch guard`
(agents/guard.py, cli/service/guard_cmd.py for its help); everything else is the click group
(cli/group.py)."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from lanewatch.cli.lanes.run_fast import run_fast

        run_fast(sys.argv[2:])  # returns only where click must parse run's arguments
    if sys.argv[1:] == ["guard"]:  # an agent's hook, before each tool call: no click
        from lanewatch.agents.guard import main as guard

        sys.exit(guard())
    from lanewatch.cli.group import main as click_main

    click_main()
