"""The collision drill (`lanewatch drill`): lanes writing the same things in parallel on purpose."""
