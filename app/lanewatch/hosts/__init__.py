"""Many hosts (docs/hosts.md): other machines' lanes in this picture, over the user's own ssh.

`config` says which hosts there are and how to reach each; `link` runs one lanewatch command
there (`hello`, `status`, `kill`, …) through `ssh`; `stream` keeps `lanewatch record --json`
running there and turns its lines into this side's `Changes`; `flags` names a half-migrated
host (no lanewatch, another scheme, writes escaping the lanes) with the command that fixes it;
`many` puts the local engine and every host's stream behind the engine's interface, for the
dashboard. Keys of remote namespaces are `NAME:/path`, so they never meet a local path.
"""
