"""Organisations, memberships and roles: a leaf app the pricing app and the planner both ask
who belongs where and who may do what.

Models live in :mod:`organisations.models`, reads in :mod:`organisations.selectors`, writes
and the role check in :mod:`organisations.services`. It imports only :mod:`lib`.
"""
