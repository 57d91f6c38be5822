"""`lanewatch mcp`: the Model Context Protocol server, over stdio, on the official Python SDK
(`mcp` >= 2, the `lanewatch[mcp]` extra). The one module that imports it.

Tools (answers in agents/answers.py and agents/listens.py, each a small JSON object, strings
inert): whoami, is_path_mine, who_wrote, my_collisions, who_listens (read-only) and
release_stale (moves stale namespaces of my checkout to the trash, only with `confirm=true`).
A failure is an MCP tool error (`isError`, one line: what is wrong and what to do), never a
traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from lanewatch import __version__
from lanewatch.agents import answers, listens
from lanewatch.errors import LanewatchError
from lanewatch.inert import inert

log = logging.getLogger(__name__)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
INSTRUCTIONS = (
    "lanewatch gives each agent session, test worker and CI job (a lane) its own scratch "
    "namespace and watches for collisions. Ask whoami for your lane and where to write "
    "temporary files; is_path_mine before writing a path outside your checkout; who_wrote "
    "when a file holds what you did not write; my_collisions for open incidents of your lane; "
    "who_listens when a server of yours finds its port or X display taken."
)


def _answer(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return call()
    except (LanewatchError, OSError) as exc:
        raise ToolError(inert(exc)) from None
    except Exception as exc:  # a bug of ours: one line to the client, no traceback
        log.warning("lanewatch mcp: %s: %s", type(exc).__name__, inert(exc))
        raise ToolError(f"lanewatch failed: {type(exc).__name__}: {inert(exc)}") from None


def build_server() -> MCPServer:
    server: MCPServer = MCPServer(
        "lanewatch", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool(annotations=READ_ONLY)
    def whoami() -> dict[str, Any]:
        """Your lane: its name, checkout, namespace, private /tmp (where to put temporary
        files) and whether it is live. `bound: false` outside a lane, with the fix."""
        return _answer(answers.whoami)

    @server.tool(annotations=READ_ONLY)
    def is_path_mine(path: str) -> dict[str, Any]:
        """Whose PATH is: `mine`, `other-lane` (naming the lane), `shared` (shared temp every
        lane writes), `unbound` (you are in no lane) or `outside`; with a reason and the fix.
        A relative PATH is taken from the server's folder: pass an absolute one."""
        return _answer(lambda: answers.is_path_mine(path))

    @server.tool(annotations=READ_ONLY)
    def who_wrote(path: str) -> dict[str, Any]:
        """Every recorded write of PATH, oldest first: when, which lane and pid (known, or
        inferred), size, sha256, and what it held (the first version whole, then diffs)."""
        return _answer(lambda: answers.who_wrote(path))

    @server.tool(annotations=READ_ONLY)
    def my_collisions() -> dict[str, Any]:
        """Open incidents in which your lane is the victim or a writer."""
        return _answer(answers.my_collisions)

    @server.tool(annotations=READ_ONLY)
    def who_listens(on: str) -> dict[str, Any]:
        """Which lane listens on ON: a port (`3000`, `5353/udp`), an X display (`:99`) or an
        abstract unix socket (`@name`); `mine` for your own lane's; `elsewhere` when a
        process of no known lane does; and the fix (your $PORT, `xvfb-run -a`)."""
        return _answer(lambda: listens.who_listens(on))

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        )
    )
    def release_stale(confirm: bool = False) -> dict[str, Any]:
        """Move the stale namespaces of your checkout (nobody runs in them) to the trash,
        restorable with `lanewatch restore`. Without confirm=true it only lists them; a live
        lane is never moved."""
        return _answer(lambda: answers.release_stale(confirm))

    return server


def serve() -> None:
    build_server().run("stdio")
