"""The lmms-eval integration: task hooks (the compat driver), the batched fast path and the
plugin entry point. Nothing here runs at import time."""
