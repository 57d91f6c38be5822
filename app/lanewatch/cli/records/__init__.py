"""Commands that read what the roots keep (`records/`): `incidents` and `history`."""
