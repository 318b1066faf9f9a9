"""Forms of the scenarios room."""
