"""Commands of receipts and gates (`proof/`): `prove`, `gate` and `hook` (the git hooks)."""
