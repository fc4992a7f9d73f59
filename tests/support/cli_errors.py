"""A user error of ``edct``: exit code 2 and one line, with no traceback."""

from __future__ import annotations

from typing import Any

from edct_task.cli.main import main


def one_line_exit_2(capsys: Any, argv: list[str], *names: str) -> str:
    """Run ``edct ARGV``: it must exit 2 with one line on stderr naming each of ``names``; the line.
    What the test's set-up printed before (lmms-eval's logger, writing lmms-eval output) is not the
    command's, and is dropped first."""
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for name in names:
        assert name in err, err
    return err
