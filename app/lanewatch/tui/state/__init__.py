"""The dashboard's state and the words about it, pure (no Textual): the store of what is shown
(`dashboard_store.Picture`), what each screen reads (`dashboard_state.py`), the notices, the
culprit of a collision, an incident's status, ages and sizes."""
