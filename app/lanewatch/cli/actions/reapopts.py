"""`service install --reap…`: the reaper's policy written to reap.toml, and `--reap` for the
unit's `record` (docs/reaper.md). Checked before anything is written, as the metrics options
are: a bad value is a usage error (exit 2) and no unit is written."""

from __future__ import annotations

import click

from lanewatch.cli.actions.reap_cmd import policy_from, policy_options
from lanewatch.cli.common import options, say
from lanewatch.cli.duration import Duration
from lanewatch.records import reaping

reap_options = options(
    click.option(
        "--reap",
        "reap_on",
        is_flag=True,
        help="The service also runs the reaper, by the policy in reap.toml.",
    ),
    policy_options("reap-"),
    click.option(
        "--reap-every",
        type=Duration(),
        help="Reaper: one pass this often.  [default: 10m]",
    ),
)


def install_reaper(
    system: bool,
    reap_on: bool,
    reap_age: float | None,
    reap_trash_retention: float | None,
    reap_budget: int | None,
    reap_every: float | None,
) -> list[str]:
    """Write reap.toml (the options over what it held) and return `record`'s `--reap`; [] when
    no reaper option was given."""
    given = (reap_age, reap_trash_retention, reap_budget, reap_every)
    if not reap_on and all(v is None for v in given):
        return []
    if system:
        raise click.UsageError(
            "the reaper runs in each user's own service (`lanewatch service install --reap-…` "
            "as that user), never in root's --system service"
        )
    policy = policy_from(None, reap_age, reap_trash_retention, reap_budget, reap_every)
    if not policy.active:
        raise click.UsageError(
            "the reaper needs a policy: --reap-age, --reap-trash-retention or --reap-budget "
            f"(or a [reap] table in {reaping.config_path()})"
        )
    if any(v is not None for v in given):
        path = reaping.save(policy)
        say(f"wrote {path}: {policy.describe()}, a pass every {policy.every:g}s")
    return ["--reap"]
