"""Scores and statistics: per-run summaries, bootstrap and Wilson intervals, judge-panel
aggregation and agreement, the console score table."""
