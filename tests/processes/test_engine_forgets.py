"""What the engine keeps per namespace goes with the namespace: N namespaces made and cleared
(the reaper's steady work, docs/reaper.md) leave every map of the engine, its model keeper, its
intakes' memo and its delivery as small as before them. A long-running service whose memory
grew with every lane it ever saw would need restarts; the soak (docs/engine.md) measures the
whole process, this test the structures."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lanewatch.actions.clear import clear
from lanewatch.engine.engine import Engine
from tests.conftest import wait_for
from tests.kits.actionkit import released_namespace

pytestmark = pytest.mark.unprivileged  # a service runs as a normal user too

N = 60
SLACK = 3  # a namespace or two in flight at the moment of the look


def sizes(obj: object, path: str = "engine", seen: set[int] | None = None) -> dict[str, int]:
    """len() of every dict, set, list and deque reachable from `obj` through lanewatch's own
    objects' attributes (not through other libraries' objects: watchdog's, threads)."""
    seen = set() if seen is None else seen
    out: dict[str, int] = {}
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, dict | set | frozenset | list | collections.deque):
        out[path] = len(obj)
        return out
    if not type(obj).__module__.startswith("lanewatch."):
        return out
    attrs: dict[str, Any] = dict(getattr(obj, "__dict__", {}))
    for slot in getattr(type(obj), "__slots__", ()):
        if hasattr(obj, slot):
            attrs[slot] = getattr(obj, slot)
    for name, value in attrs.items():
        out.update(sizes(value, f"{path}.{name}", seen))
    return out


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    root = tmp_path / "root"
    root.mkdir()
    # Without kernel attribution: its caches are bounded by count and time, not by namespaces
    # (processes/pidlane.py; their own test is in test_attribution_parts.py).
    e = Engine([str(root)], attribution=False)
    e.start(lambda changes: None)
    yield e
    e.stop()


def cycle(engine: Engine, root: Path, tag: str, n: int) -> None:
    made = [released_namespace(root, f"{tag}-{i}", files=5) for i in range(n)]
    keys = {str(ns) for ns in made}
    wait_for(lambda: keys <= set(engine.snapshot().upserts), 30)
    for ns in made:
        assert clear(ns, roots=[root]).outcome == "cleared"
    wait_for(lambda: not keys & set(engine.snapshot().upserts), 30)


def test_namespaces_made_and_cleared_leave_the_engine_as_small_as_before(
    engine: Engine, tmp_path: Path
) -> None:
    root = Path(engine.roots[0])
    cycle(engine, root, "warm", 5)
    before = sizes(engine)
    cycle(engine, root, "many", N)

    def grown() -> dict[str, tuple[int, int]]:
        after = sizes(engine)
        return {k: (before.get(k, 0), v) for k, v in after.items() if v - before.get(k, 0) > SLACK}

    # The model forgets at once; the delivery hands its pending removals to the sink on its
    # own beat, which under load comes a moment after the snapshot shows them gone.
    try:
        wait_for(lambda: not grown(), 30, what="the engine back to its size")
    except AssertionError:
        raise AssertionError(f"grew with {N} namespaces made and cleared: {grown()}") from None
    after = sizes(engine)
    for held in ("memo.files", "memo.ledgers", "keeper.views", "keeper._due"):  # reached
        assert any(k.endswith(held) for k in after), (held, sorted(after))
