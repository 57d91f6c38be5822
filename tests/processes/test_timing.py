"""The clock's rules are one rule: the state `classify` judges flips exactly when `next_change`
says it next changes, and the takeover rule calls the previous owner fresh on the same side."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lanewatch.linux.procid import Liveness
from lanewatch.model import timing
from lanewatch.model.classify import classify
from lanewatch.model.views import NsState
from tests.processes.test_classify import BOOT, HOST, NOW, ev, read, stamp


@given(
    interval=st.floats(min_value=0.01, max_value=3600.0),
    age=st.floats(min_value=0.0, max_value=100.0),
)
def test_a_live_owner_turns_hung_exactly_when_next_change_says(interval: float, age: float) -> None:
    s = stamp(heartbeat_interval=interval, heartbeat_at=NOW - age)
    beat = s.heartbeat_at
    due = timing.next_change(s, beat, None, NOW)

    def state(at: float) -> NsState:
        return classify(read(s), ev(Liveness.ALIVE), at, host=HOST, boot_id=BOOT).state

    overdue_now = timing.is_overdue(s, beat, NOW)
    assert (state(NOW) is NsState.HUNG) == overdue_now
    if due is None:  # already past the limit: nothing left for the clock to change
        assert overdue_now
        return
    assert state(due) is NsState.HUNG and timing.is_overdue(s, beat, due)
    before = due - 0.002  # just before the limit: not yet overdue
    if before >= NOW:
        assert state(before) is NsState.LIVE and not timing.is_overdue(s, beat, before)


def test_the_sparkline_ticks_each_second_while_writes_are_in_the_window() -> None:
    assert timing.next_change(None, None, int(NOW), NOW + 0.25) == float(int(NOW) + 1)
    late = NOW + timing.RATE_WINDOW + 2
    assert timing.next_change(None, None, int(NOW), late) is None
