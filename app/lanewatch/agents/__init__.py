"""What agents ask lanewatch, and how they are stopped: the MCP server (`lanewatch mcp`), the
hook guard (`lanewatch guard`) and their install. docs/agents.md is the user's page.

`me` (who is asking) and `whosepath` (whose is this path) are lean: the guard runs before every
tool call of an agent, so they import only the stdlib and `lanes`. `answers` holds the tools'
replies as plain data; `mcp_server` is the one module that imports the MCP SDK (the `mcp` extra).
"""
