"""The always-on recorder and what other programs ask lanewatch: `record` (the engine
headless), `service` (its systemd user unit), `events` (JSON lines for orchestrators), `hello`
(the many-host handshake), `mcp` and `guard` (agents)."""
