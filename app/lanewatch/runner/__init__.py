"""The runner: `lanewatch run` and what it does around CMD (`run.py`), the fence, a private
/tmp per lane (`fence.py`: docs/fence.md), waiting for a busy lane or taking the next free one
(`pick.py`), the runner as subreaper waiting for the lane's processes (`linger.py`), and CMDs
that hand work to a server outside the lane (`launchers.py`). Above `lanes` (the Lane API it
runs CMD in), below `proof` (`prove` runs its steps through it)."""
