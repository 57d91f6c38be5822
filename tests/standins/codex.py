"""Codex CLI's Linux sandbox as it runs each command, for tests/processes/test_launchers.py.

Codex runs every shell command of the model in bubblewrap (openai/codex
`codex-rs/linux-sandbox/README.md`; `--unshare-user` always, openai/codex#13624): the whole
tree read-only (`--ro-bind / /`), the writable roots bound read-write over it (in
`workspace-write`: the working folder, `/tmp` and `$TMPDIR`, unless `exclude_slash_tmp` /
`exclude_tmpdir_env_var`), a pid namespace of its own with a fresh /proc, and the sandbox
dies with its parent.

argv[1:]: the shell command to run, as Codex would.
"""

from __future__ import annotations

import os
import sys


def bwrap_argv(command: str) -> list[str]:
    cwd = os.getcwd()
    argv = ["bwrap", "--unshare-user", "--unshare-pid", "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    roots = [cwd, "/tmp"]
    tmpdir = os.environ.get("TMPDIR")
    if tmpdir and os.path.isdir(tmpdir):
        roots.append(tmpdir)
    for root in dict.fromkeys(roots):
        argv += ["--bind", root, root]
    return [*argv, "--chdir", cwd, "--", "sh", "-c", command]


if __name__ == "__main__":
    argv = bwrap_argv(" ".join(sys.argv[1:]))
    os.execvp(argv[0], argv)
