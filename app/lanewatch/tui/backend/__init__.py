"""What the dashboard asks of the rest of lanewatch, off the UI thread: the actions (kill,
clear, trash, restore), a lane's details and files, an incident's export. No Textual here."""
