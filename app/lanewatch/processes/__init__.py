"""Probing processes: who owns a namespace, who holds which path, which lane a pid belongs to."""
