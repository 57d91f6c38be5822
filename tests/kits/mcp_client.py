"""Drives `lanewatch mcp` with the MCP SDK's own client over stdio (a script, not a test).

`python mcp_client.py CALLS_JSON [ENV_JSON]`: CALLS_JSON is a list of [tool, arguments]; the
server is this interpreter's `-m lanewatch mcp`, started the SDK's way (its default environment,
plus ENV_JSON). Prints one JSON object: the tools listed and, per call, `is_error`, the
structured answer and the text."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client, StdioServerParameters


async def drive(calls: list[list[Any]], env: dict[str, str] | None) -> dict[str, Any]:
    server = StdioServerParameters(command=sys.executable, args=["-m", "lanewatch", "mcp"], env=env)
    async with Client(server) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        answers = []
        for name, arguments in calls:
            r = await client.call_tool(name, arguments)
            text = "".join(getattr(c, "text", "") for c in r.content)
            answers.append({"is_error": r.is_error, "data": r.structured_content, "text": text})
    return {"tools": tools, "answers": answers}


if __name__ == "__main__":
    env = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    print(json.dumps(asyncio.run(drive(json.loads(sys.argv[1]), env))))
