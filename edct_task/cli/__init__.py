"""The ``edct`` command line (``edct_task.cli.main:console``, which runs ``main``)."""
