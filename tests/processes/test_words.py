"""Words that stay true: the code, the docs and the tests say what a thing is, never "issue N"
(a number a reader outside our tracker cannot resolve; CHANGELOG.md keeps them). Another
project's issue is named as `owner/repo#N` or by its address."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHERE = ("app", "docs", "tests")
SUFFIXES = {".py", ".md", ".json", ".toml", ".tcss"}
OURS = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)


def test_no_issue_numbers_in_code_docs_or_tests() -> None:
    found = []
    for top in WHERE:
        for path in sorted((REPO / top).rglob("*")):
            if path.suffix not in SUFFIXES or "__pycache__" in path.parts or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OURS.search(line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not found, "say what it is, not its issue number:\n" + "\n".join(found)
