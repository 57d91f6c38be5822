"""How the dashboard runs a blocking job (a disk read, a scan, the engine's start) off the UI
thread: a thread worker named by its group and description, whose error is shown in the worker,
never fatal to the app (`exit_on_error=False`), and `exclusive`: a newer job of the group cancels
the older, whose answer would be stale."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual import work
from textual.worker import Worker


class WorkerHost(Protocol):
    """What runs a worker: Textual's `DOMNode.run_worker` (an app or a screen). The one
    declaration of it for the parts that are handed their owner as a Protocol."""

    def run_worker(
        self,
        work: Callable[[], Any],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...


def in_thread(
    node: WorkerHost, job: Callable[[], object], group: str, description: str
) -> Worker[Any]:
    """Run `job` now, in a thread worker of `node`'s."""
    return node.run_worker(
        job,
        thread=True,
        exclusive=True,
        group=group,
        description=description,
        exit_on_error=False,
    )


def thread_work(group: str, description: str) -> Any:
    """The same as a decorator: calling the method starts it in a thread worker."""
    return work(
        thread=True, exclusive=True, group=group, description=description, exit_on_error=False
    )
