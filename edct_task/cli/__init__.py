"""The ``edct`` command line (``edct_task.cli.main:main``)."""
