"""Commands that act on lanes, each after its checks (`actions/`): `kill`, `clear`, `trash`,
`restore`, `purge` and `reap`; `ask.py` asks on the terminal before an action."""
