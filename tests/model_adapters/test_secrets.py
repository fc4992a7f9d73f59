"""One rule names a secret everywhere: config options, headers, query parameters, model_args."""

from __future__ import annotations

import pytest

from model_adapters.secrets import is_secret_name


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "api-key",
        "apiKey",
        "X-Api-Key",
        "Ocp-Apim-Subscription-Key",
        "Authorization",
        "Proxy-Authorization",
        "access_token",
        "X-Auth-Token",
        "password",
        "passwd",
        "client_secret",
        "X-Goog-Signature",
        "sig",
        "Cookie",
        "hf_token",
    ],
)
def test_credentials_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "api_key_env",
        "model",
        "max_tokens",
        "max_new_tokens",
        "monkey",
        "base_url",
        "pretrained",
        "keys_seen",
        "",
    ],
)
def test_other_names_are_not(name: str) -> None:
    assert not is_secret_name(name)
