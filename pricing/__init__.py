"""Accelerator catalog, providers, versioned price books, vendor quotes and on-prem cost."""
