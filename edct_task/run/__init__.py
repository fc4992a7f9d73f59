"""Composition: one run from its configuration (data → roles → engine → the typed run log)."""
