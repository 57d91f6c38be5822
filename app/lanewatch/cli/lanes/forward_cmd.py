"""`lanewatch forward LANE PORT [HOSTPORT]`: publish a net-fenced lane's port on the host's
127.0.0.1 until Ctrl-C (actions/forward.py; docs/fence.md, "Reaching a lane's port").

Exit codes: 0 stopped (Ctrl-C, SIGTERM, or the lane ended); 3 refused (not net-fenced, gone,
another user's, HOSTPORT taken); 8 no such lane."""

from __future__ import annotations

import signal
import sys

import click

from lanewatch.cli import completers
from lanewatch.cli.common import fail, friendly_errors
from lanewatch.cli.exits import Exit


@click.command("forward")
@click.argument("target", shell_complete=completers.targets)
@click.argument("port", type=click.IntRange(1, 65535))
@click.argument("host_port", metavar="[HOSTPORT]", required=False, type=click.IntRange(0, 65535))
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A root to look for the lane in, besides the known ones (repeatable).",
)
@click.option(
    "--allow-other-user",
    is_flag=True,
    help="As root, allow forwarding another user's lane (refused otherwise).",
)
@friendly_errors
def forward_command(
    target: str, port: int, host_port: int | None, roots: tuple[str, ...], allow_other_user: bool
) -> None:
    """Publish the net-fenced lane TARGET's PORT on the host's 127.0.0.1:HOSTPORT (default:
    PORT; 0: any free port) until Ctrl-C, like `kubectl port-forward`.

    Only for a lane run with `--fence net` (its 127.0.0.1 is its own). Prints the URL, then
    copies each connection to the lane's 127.0.0.1:PORT. The lane's command is re-checked
    (pid, start time, boot id, uid, network namespace) right before its namespace is entered.
    Stops when the lane ends.
    """
    from lanewatch.actions.forward import ForwardRefused, open_forward
    from lanewatch.actions.targets import known_roots, resolve

    resolved = resolve(target, known_roots(roots) if roots else None)
    try:
        fwd = open_forward(resolved, port, host_port, allow_other_user)
    except ForwardRefused as exc:
        fail(str(exc), Exit.REFUSED)

    def _stop(_sig: int, _frame: object) -> None:
        fwd.stop()
        fwd.listener.close()

    signal.signal(signal.SIGTERM, _stop)
    click.echo(
        f"lanewatch: forwarding {fwd.url} -> lane {fwd.lane!r} 127.0.0.1:{port} (Ctrl-C stops)"
    )
    sys.stdout.flush()
    try:
        why = fwd.serve()
    except KeyboardInterrupt:
        why = "stopped"
    finally:
        fwd.listener.close()
    click.echo(f"lanewatch: forward {why}", err=True)
