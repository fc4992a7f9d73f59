"""``edct estimate``: a run's calls, tokens, cost and wall time, predicted before any model is contacted.

``plan.estimate`` is the entry point; ``simulate`` runs the real pipelined driver on a virtual
clock against simulated backends; ``latency`` holds the per-role latency models; ``report``
renders the text; ``presets`` resolves a shipped preset's name.
"""
