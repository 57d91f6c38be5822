"""Every read of /proc lives in `linux/`: outside it, a /proc path is only named in docstrings,
comments and words for people (docs/architecture.md, the `linux/` room)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "app" / "lanewatch"
# A path to open: a string that starts with /proc, or a script's quoted one. Words for people
# ("needs Linux's /proc") are not reads.
PROC_PATH = re.compile(r"""(?:^|["'])/proc\b""", re.MULTILINE)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constants that are docstrings (a module's, a class's, a function's)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _proc_strings(path: Path) -> list[str]:
    """`path:line` of each string in code (not a docstring) that names /proc."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and PROC_PATH.search(node.value)
        and id(node) not in docs
    ]


def test_only_the_linux_room_names_proc_in_code() -> None:
    outside = [p for p in PACKAGE.rglob("*.py") if (PACKAGE / "linux") not in p.parents]
    assert len(outside) > 100  # the tree was found
    hits = [f"{p.parent.name}/{hit}" for p in sorted(outside) for hit in _proc_strings(p)]
    assert hits == [], "read /proc through linux/ (proc.py, ancestry.py, userns.py …)"


def test_the_check_sees_a_proc_path_in_code_and_not_in_words(tmp_path: Path) -> None:
    planted = tmp_path / "x.py"
    planted.write_text(
        '"""Reads /proc."""\n\n'
        "def f(pid):\n"
        '    """Its /proc/PID/stat."""\n'
        '    print("needs Linux\'s /proc")  # /proc\n'
        '    return open(f"/proc/{pid}/stat")\n'
        "SCRIPT = 'import os\\nos.readlink(\"/proc/self/ns/mnt\")'\n"
    )
    assert sorted(_proc_strings(planted)) == ["x.py:6", "x.py:7"]
