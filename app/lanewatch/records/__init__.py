"""The root's stores that outlive a dashboard: incidents, write history and evidence, read by the
CLI too."""
