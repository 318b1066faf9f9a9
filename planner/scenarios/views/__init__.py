"""Pages of the scenarios room."""
