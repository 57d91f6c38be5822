"""What in a batch asks the prober for its working pace (`engine._writes`): a data-file write
in a root, or kernel attribution's news of our lanes; not a kernel batch that attributed
nothing, nor another root's lane writing in shared temp (the prober reads only our lanes)."""

from __future__ import annotations

from pathlib import Path

from lanewatch.engine.engine import _writes
from lanewatch.kernel.writefacts import KernelBatch
from lanewatch.model.filehistory import WriteRecord


def test_a_kernel_batch_wakes_the_prober_only_for_our_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    roots = [str(root)]
    rec = WriteRecord(1.0, 3)
    ours = KernelBatch(writes=((str(root.resolve() / "ns" / "f"), rec),))
    elsewhere = KernelBatch(writes=(("/tmp/another-roots-lane/f", rec),))
    seen_for_us = KernelBatch(observations=((object(), str(root.resolve())),))  # type: ignore[arg-type]
    seen_for_another = KernelBatch(observations=((object(), ""),))  # type: ignore[arg-type]
    assert _writes([("kernel", ours)], roots)
    assert _writes([("kernel", seen_for_us)], roots)
    assert not _writes([("kernel", KernelBatch(lost="fanotify queue overflow"))], roots)
    assert not _writes([("kernel", elsewhere)], roots)
    assert not _writes([("kernel", seen_for_another)], roots)
