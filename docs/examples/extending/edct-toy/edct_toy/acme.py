"""``acme-edit``: Acme's hosted image editor, a paid backend.

One POST per edit (the image as PNG, the instruction, the seed); the reply is the edited PNG and
its price in the ``X-Acme-Cost-USD`` header, which ``usage()`` reports so that the cost ceiling
(``max_cost_usd``) can stop the role.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from model_adapters.cost_ceiling import PaidOptions
from verification.backends import BackendRecord, Latency


class AcmeOptions(PaidOptions):
    """``acme-edit``: Acme's hosted editor."""

    model: str = Field("acme-1", description="Acme's model id.")
    base_url: str = Field("https://api.acme.example/v1", description="Acme's API address.")
    api_key_env: str = Field("ACME_API_KEY", description="The environment variable holding the API key.")
    timeout_s: float = Field(120.0, gt=0, description="Seconds one edit may take.")


class AcmeEditor:
    """An ``ImageEditor`` (model_adapters.contracts) over Acme's API."""

    backend = "acme-edit"

    def __init__(self, options: AcmeOptions) -> None:
        import httpx

        self.options = options
        self.name = f"acme-edit:{options.model}"
        self._client = httpx.Client(base_url=options.base_url, timeout=options.timeout_s)
        self._spent = 0.0
        self._edits = 0

    def identity(self) -> dict[str, Any]:
        """What the results and the stage cache record: no key, no address."""
        return {"backend": self.backend, "model": self.options.model}

    def edit(self, image: Any, instruction: str, *, seed: int) -> Any:
        from PIL import Image

        png = io.BytesIO()
        image.save(png, format="PNG")
        reply = self._client.post(
            "/edits",
            headers={"Authorization": f"Bearer {os.environ[self.options.api_key_env]}"},
            data={"model": self.options.model, "instruction": instruction, "seed": str(seed)},
            files={"image": ("image.png", png.getvalue(), "image/png")},
        )
        reply.raise_for_status()
        self._edits += 1
        self._spent += float(reply.headers.get("X-Acme-Cost-USD", "0"))
        return Image.open(io.BytesIO(reply.content)).convert("RGB")

    def usage(self) -> dict[str, Any]:
        return {"backend": self.backend, "edits": self._edits, "cost_usd": round(self._spent, 6)}

    def close(self) -> None:
        self._client.close()  # idempotent


def build(options: Mapping[str, Any]) -> AcmeEditor:
    return AcmeEditor(AcmeOptions(**options))


RECORD = BackendRecord(
    "editor",
    "acme-edit",
    build,
    AcmeOptions,
    Latency(7.0, sd=1.5, note="Acme's hosted editor, ~7 s per edit"),
    paid=True,
)
"""``acme-edit``'s registration: a paid editor (the registry wraps it in the cost ceiling)."""
