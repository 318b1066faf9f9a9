"""Plumbing both apps use (planner and pricing): who acts, how a row is updated and audited,
how domain errors become API responses. Nothing here knows about projects or prices."""
