"""Tests of estimator.calibration: no database, no Django."""
