"""Pages of the planner not yet in a room; ``planner.urls_web`` routes them."""
