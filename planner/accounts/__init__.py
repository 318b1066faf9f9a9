"""The accounts room: signing in, and the API tokens a user makes, lists and revokes."""
