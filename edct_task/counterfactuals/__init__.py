"""Verified counterfactual pairs of a finished run, as training and analysis data (a tool on top of a run)."""
