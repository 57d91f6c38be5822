"""`lanewatch reap [--dry-run]`: one pass of the reaper's policy (docs/reaper.md).

The policy is `reap.toml` in the state folder (`records/reaping.py`), or `--config PATH`;
`--age`, `--trash-retention` and `--budget` set or override its values for this pass. A pass
clears stale, orphan and released namespaces idle longer than the age, the oldest stale first
while a root's namespaces hold more than the budget, and purges trash entries older than the
retention, each by the clear and purge of `lanewatch clear` / `purge` with all their checks
(`actions/reap.py`). `--dry-run` shows what the next pass would do (each clear checked as a
clear's dry run is) and changes nothing. A pass that acts is written into `reap.json`, which
the dashboard and the service's metrics read.

Exit codes: 0 done (or nothing to do); 1 a purge could not delete an entry; 2 a bad value in
reap.toml or an option; 3 some clear was refused at the moment of acting (the message says
why; the others went ahead); 7 nobody to confirm (no terminal and no --yes).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from lanewatch.actions.reap import Pass, plan, run
from lanewatch.actions.results import human_size
from lanewatch.actions.targets import known_roots
from lanewatch.cli.actions.ask import confirm, safe
from lanewatch.cli.common import F, friendly_errors, options
from lanewatch.cli.duration import Duration
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import read_roots
from lanewatch.records import reaping


class Size(click.ParamType):
    """`500M`, `20G`, `1T` as bytes (decimal, as sizes are shown; 20GiB: binary)."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return reaping.parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def policy_from(
    config: str | None,
    age: float | None,
    trash_retention: float | None,
    budget: int | None,
    every: float | None = None,
) -> reaping.ReapPolicy:
    """reap.toml's policy (or none) with the options laid over it; a bad file: exit 2."""
    try:
        base = reaping.load(Path(config) if config else None) or reaping.ReapPolicy()
    except reaping.ReapConfigError as exc:
        raise click.UsageError(str(exc)) from None
    return reaping.ReapPolicy(
        age=age if age is not None else base.age,
        trash_retention=trash_retention if trash_retention is not None else base.trash_retention,
        budget=budget if budget is not None else base.budget,
        every=every if every is not None else base.every,
    )


def policy_options(prefix: str = "") -> Callable[[F], F]:
    """--age, --trash-retention, --budget: the policy's values (reap.toml's keys), named
    `--{prefix}age` … (`service install --reap-age`, cli/actions/reapopts.py)."""
    said = {
        "age": "Clear stale, orphan and released namespaces idle this long (2d, 12h).",
        "trash-retention": "Purge trash entries cleared this long ago (7d).",
        "budget": "Per root, clear the oldest stale first while its namespaces hold more "
        "than this on disk (20G).",
    }
    return options(
        *(
            click.option(
                f"--{prefix}{name}",
                type=Size() if name == "budget" else Duration(),
                help=f"Reaper: {text[0].lower()}{text[1:]}" if prefix else text,
            )
            for name, text in said.items()
        )
    )


@click.command("reap")
@read_roots
@policy_options()
@click.option("--config", type=click.Path(dir_okay=False), help="The policy file (reap.toml).")
@click.option("--dry-run", is_flag=True, help="Show what the next pass would do; change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the pass as JSON.")
@click.option("--next-in", type=float, hidden=True, help="The service: its next pass, in s.")
@friendly_errors
def reap_command(
    roots: Sequence[str],
    age: float | None,
    trash_retention: float | None,
    budget: int | None,
    config: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    next_in: float | None,
) -> None:
    """Run one pass of the reaper's policy now (reap.toml, or the options)."""
    policy = policy_from(config, age, trash_retention, budget)
    paths = [Path(r) for r in roots] if roots else known_roots()
    if not policy.active:
        _print(Pass(0.0, policy, (), dry_run), as_json, [])
        return
    planned = None
    if not dry_run:  # what is confirmed is what is done (each still checked as it is done)
        planned = plan(paths, policy)
        steps = planned[0]
        if steps:
            lines = [f"{s.verb} {s.label} in {s.root}: {s.why}" for s in steps]
            confirm([safe(line) for line in lines], f"Act on these {len(steps)}?", yes)
    done = run(paths, policy, dry_run=dry_run, planned=planned)
    if not dry_run:
        if next_in is not None:  # the service: its policy, and when it runs again
            reaping.record_pass(done.summary(), policy, time.time() + next_in)
        else:
            state = reaping.read_state()
            reaping.record_pass(done.summary(), None, state.next_at if state else None)
    _print(done, as_json, list(done.notes))
    if any(d.outcome == "failed" for d in done.done):
        sys.exit(Exit.FAILED)
    if any(d.outcome == "refused" for d in done.done):
        sys.exit(Exit.REFUSED)


def _print(done: Pass, as_json: bool, notes: list[str]) -> None:
    s = done.summary()
    if as_json:
        report(
            "reap",
            {
                "dry_run": done.dry_run,
                "policy": done.policy.to_json(),
                "at": done.at,
                "steps": [d.to_json() for d in done.done],
                "notes": notes,
                "summary": {
                    "cleared": s.cleared,
                    "purged": s.purged,
                    "refused": s.refused,
                    "failed": s.failed,
                    "cleared_bytes": s.cleared_bytes,
                    "purged_bytes": s.purged_bytes,
                },
            },
        )
        return
    click.echo(f"policy: {done.policy.describe()}")
    for note in notes:
        click.echo(safe(note))
    if not done.done:
        click.echo("nothing to reap")
        return
    for d in done.done:
        click.echo(safe(f"{d.message} [{d.step.why}]"), err=d.outcome in ("refused", "failed"))
    if done.dry_run:
        would = [d for d in done.done if d.outcome.startswith("would")]
        size = human_size(sum(d.freed for d in would))
        click.echo(f"dry run: {len(would)} of {len(done.done)} would go ({size} on disk)")
    else:
        click.echo(
            f"cleared {s.cleared} ({human_size(s.cleared_bytes)} moved to the trash), "
            f"purged {s.purged} ({human_size(s.purged_bytes)} freed), "
            f"refused {s.refused}, failed {s.failed}"
        )
