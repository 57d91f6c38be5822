"""What the tests share: lanes and engines to test against (`enginekit`, `actionkit`,
`attributionkit`, `engine_driver`), processes and other users (`prockit`, `userkit`,
`denied_probe`), a real OpenSSH server on loopback (`sshkit`), hostile names and bytes
(`hostile`), the JSON contract (`contractkit`) and an MCP client (`mcp_client`)."""
