"""The one user-error base class: what the user must change, said in one line.

Every error a user can fix (configuration, data, a cache of another version, an unreadable run,
report, bundle or labels file) derives from ``UserError``. The command line maps it to exit code 2
and one line ``edct: <prefix><message>`` in one place (``edct_task.cli.main``); the lmms-eval
adapter turns it into one task-load message. Backend failures are not user errors: they are data
(``model_adapters.errors``), recorded per sample.
"""

from __future__ import annotations


class UserError(Exception):
    """An error the user fixes; the message says how. Exit code 2, no traceback.

    The message is kept to one line whatever it quotes: a line break in a file name, a table's
    cell or a server's reply is shown escaped (``\\n``), never as a second line.
    """

    prefix = ""
    """Shown before the message (``configuration error: ``, ``data error: ``…)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(_one_line(a) if isinstance(a, str) else a for a in args))

    def line(self) -> str:
        """The one line the user sees."""
        return f"{self.prefix}{self}"


class ConfigError(UserError, ValueError):
    """The run configuration is invalid; the message says how to fix it."""

    prefix = "configuration error: "


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")
