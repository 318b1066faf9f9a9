"""The scenarios room: projects, scenarios, estimation runs, levers, comparisons, run diffs."""
