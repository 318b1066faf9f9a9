"""Calibration of the estimator as a library: the published cases, the fit of each
accelerator family and software stack, its cross-validation, the whole-run and
fine-tuning checks, and the accuracy report (``python -m estimator calibrate`` and
``python -m estimator accuracy``).

Pure Python + numpy like :mod:`estimator.core`: no django, celery, planner or pricing.
"""
