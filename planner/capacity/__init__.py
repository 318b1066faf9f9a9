"""The capacity room: capacity plans, searched by the workers in chunks."""
