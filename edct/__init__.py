"""Inspect's names for EDCT: ``inspect eval edct/edct_bench``, ``--model edct/faithful``.

Loaded by inspect_ai through the ``inspect_ai`` entry point ``edct`` (``edct._registry``); the
work is in ``edct_task.inspect``. Inspect prefixes the components of an installed package with
the package's import name, hence this package's name.
"""
