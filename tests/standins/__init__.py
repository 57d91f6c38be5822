"""Stand-in agents: small programs that behave as the real tools do on disk and in processes
(docs/launchers.md cites where each behaviour is described). tests/processes/test_launchers.py runs
them in lanes. They never talk to a model or the network."""
