"""`lanewatch audit`: run the user's own command in parallel lanes; list what it wrote outside."""
