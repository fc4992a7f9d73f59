"""The one rule for what names a secret: config option names, HTTP header names, URL query
parameters and lmms-eval ``model_args`` keys are all judged by ``is_secret_name``.

A name is secret when its last word is a credential word (``api_key``, ``X-Api-Key``,
``Ocp-Apim-Subscription-Key``, ``access_token``, ``Authorization``, ``X-Goog-Signature``,
``password``…); words are split at ``_``, ``-``, ``.``, spaces and camelCase. ``api_key_env``
(which *names* the environment variable holding a key) is not a secret: its last word is ``env``.
"""

from __future__ import annotations

import re

SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "sig",
        "signature",
    }
)

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def is_secret_name(name: object) -> bool:
    """Whether ``name`` (an option, header, query parameter or argument name) holds a credential."""
    words = [w for w in _SEPARATORS.split(_CAMEL.sub(r"\1_\2", str(name)).lower()) if w]
    return bool(words) and words[-1] in SECRET_WORDS
