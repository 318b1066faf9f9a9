"""Tests of the estimator."""
