"""Tests of estimator.core: no database, no Django."""
