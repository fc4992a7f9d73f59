"""The bottom layer: typed records, the requests the protocol yields, the user-error base class,
the canonical JSON every digest is taken over.

Imports nothing of ``edct_task`` (an import-linter contract in ``pyproject.toml``) and no heavy
library: importing it loads none of OpenCV, PIL, torch, httpx or transformers.
"""
