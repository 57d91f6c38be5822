"""`lanewatch mcp`: the MCP server over stdio (agents/mcp_server.py; docs/agents.md)."""

from __future__ import annotations

import click

from lanewatch.cli.common import fail
from lanewatch.cli.exits import Exit

NEEDS_EXTRA = (
    "`lanewatch mcp` needs the MCP SDK: pip install 'lanewatch[mcp]' "
    "(or `pip install 'mcp>=2.3'` beside lanewatch)"
)


@click.command("mcp")
def mcp_command() -> None:
    """Serve the lane's questions to an agent over MCP (stdio): whoami, is_path_mine,
    who_wrote, my_collisions, release_stale. Start it from the agent (docs/agents.md)."""
    try:
        from lanewatch.agents.mcp_server import serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        fail(NEEDS_EXTRA, Exit.UNSUPPORTED)
    serve()
