"""`lanewatch audit`: run the user's own command in parallel lanes and list what it wrote outside them."""
