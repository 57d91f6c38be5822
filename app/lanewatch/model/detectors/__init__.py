"""The incident detectors, one module per kind; `model/kinds.py` is their registry."""
