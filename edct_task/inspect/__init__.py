"""EDCT as an Inspect task (``inspect eval edct/edct_bench``): a host, not a second protocol.

``tasks`` builds the datasets and the run (``session``), ``solver`` advances ``SampleRun`` with
Inspect's model as the target (the real multi-turn conversation, images included) and the other
roles through the stage-cached dispatcher of ``run.runner.compose``, ``scorer`` turns each record
into per-sample values with the project's intervals, ``provider`` serves the calibration world's
reference models as ``--model edct/<behaviour>``. The names Inspect sees are registered by the
top-level ``edct`` package (the ``inspect_ai`` entry point).
"""
