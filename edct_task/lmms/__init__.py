"""The lmms-eval integration: the task hooks (``lmms-eval --tasks edct_bench``), the ``edct_reference``
model, the EDCT tasks as data for ``edct run --model``, and the export of a run as lmms-eval's files."""
