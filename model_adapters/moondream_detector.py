"""Moondream's HTTP ``/detect`` (the paper's detector: Moondream3-preview), cloud or local server.

Wire protocol (https://moondream.ai/c/docs/advanced/api/detect)::

    POST {base_url}/detect        X-Moondream-Auth: <key>     (base_url default https://api.moondream.ai/v1)
    {"image_url": "data:image/jpeg;base64,...", "object": "<target>"}
    → 200 {"request_id": "...", "objects": [{"x_min": 0.2, "y_min": 0.3, "x_max": 0.6, "y_max": 0.8}, ...]}

Coordinates are normalised to [0, 1]; Moondream reports no confidence, so every box scores 1.0.
An empty ``objects`` list is "target not found" (a ``Detections`` with a detail). Failures are
exceptions from ``model_adapters.errors`` so that the engine records them and never caches them:
429 → ``RateLimited`` (Retry-After honoured), 5xx / timeouts / dropped connections → transient,
retried with backoff up to ``max_retries``; 401/403 → permanent (names the key variable); a 2xx
body that is not JSON or lacks ``objects`` → ``MalformedReply`` (retried, then raised).

Options: ``base_url``, ``api_key_env`` (default ``MOONDREAM_API_KEY``; required for the cloud
URL, optional for a local server), ``timeout_s`` (60), ``max_retries`` (4), ``backoff_base_s``,
``backoff_max_s``, ``concurrency`` (2: Moondream's cloud allows about 2 requests/s), ``max_boxes``
(10), ``max_side`` (1024: larger images are
downscaled before upload, boxes are normalised so nothing changes), ``jpeg_quality`` (90);
``max_cost_usd`` with ``price_per_call_usd`` (the API reports no cost): ``MoondreamOptions``.
"""

from __future__ import annotations

import base64
import io
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import httpx
from PIL import Image
from pydantic import Field

from model_adapters.cost_ceiling import PaidOptions
from verification.detection import Detections, finalize_detections, normalize_target
from verification.factories import DetectorOptions, detector_factory

__all__ = ["CLOUD_URL", "MoondreamDetector", "MoondreamOptions", "from_options", "moondream_from_options"]

CLOUD_URL = "https://api.moondream.ai/v1"


class MoondreamOptions(PaidOptions, DetectorOptions):
    """``moondream``: Moondream's HTTP /detect, cloud or a local server (box masks by default)."""

    reports_cost: ClassVar[bool] = False

    base_url: str = Field(CLOUD_URL, description="The API root; a local server needs no key.")
    api_key_env: str | None = Field(
        None,
        description="The environment variable holding the key (default MOONDREAM_API_KEY for the cloud).",
    )
    timeout_s: float = Field(60.0, description="Seconds per request.")
    max_retries: int = Field(4, description="Retries of a failed request.")
    backoff_base_s: float = Field(1.0, description="First retry wait; doubles up to backoff_max_s.")
    backoff_max_s: float = Field(60.0, description="Longest retry wait.")
    concurrency: int = Field(2, description="Requests in flight (the cloud allows about 2 per second).")
    max_boxes: int = Field(10, description="Boxes kept at most.")
    max_side: int = Field(1024, description="Larger images are downscaled before upload.")
    jpeg_quality: int = Field(90, description="JPEG quality of the upload.")


class MoondreamDetector:
    """A ``Detector`` on Moondream's ``/detect`` endpoint (see the module notes)."""

    name = "moondream"

    def __init__(
        self,
        http: Any,
        retry: Any,
        *,
        base_url: str = CLOUD_URL,
        api_key: str | None = None,
        max_boxes: int = 10,
        max_side: int = 1024,
        jpeg_quality: int = 90,
    ) -> None:
        if max_boxes < 1 or max_side < 64 or not 1 <= jpeg_quality <= 100:
            raise ValueError("need max_boxes >= 1, max_side >= 64 and 1 <= jpeg_quality <= 100")
        self.http = http
        """``model_adapters.remote_editor.HttpCaller`` without retries: one mapped exchange."""
        self.retry = retry
        """``model_adapters.retry.RetryPolicy`` around the exchange *and* the reading of its reply."""
        self.url = base_url.rstrip("/") + "/detect"
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["X-Moondream-Auth"] = api_key
        self.max_boxes = int(max_boxes)
        self.max_side = int(max_side)
        self.jpeg_quality = int(jpeg_quality)

    def identity(self) -> dict[str, object]:
        return {"backend": self.name, "url": self.url, "max_boxes": self.max_boxes, "max_side": self.max_side}

    def data_uri(self, image: Image.Image) -> str:
        """The image as a JPEG data URI, downscaled to ``max_side``."""
        rgb = image.convert("RGB")
        s = min(1.0, self.max_side / max(rgb.size))
        if s < 1.0:
            rgb = rgb.resize(
                (max(1, round(rgb.width * s)), max(1, round(rgb.height * s))), Image.Resampling.LANCZOS
            )
        buf = io.BytesIO()
        rgb.save(buf, format="JPEG", quality=self.jpeg_quality)
        return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")

    def detect(self, image: Image.Image, target: str) -> Detections:
        from model_adapters.transport import MalformedReply, json_body

        phrase = normalize_target(target)
        if not phrase:
            return Detections(detail=f"{self.name}: empty target, nothing to look for")
        body = {"image_url": self.data_uri(image), "object": phrase}
        what = f"moondream detect {phrase!r}"

        def parse(response: httpx.Response) -> list[tuple[float, float, float, float]]:
            reply = json_body(response, what)
            objects = reply.get("objects") if isinstance(reply, Mapping) else None
            if not isinstance(objects, list):
                raise MalformedReply(f"{what}: reply has no 'objects' list")
            boxes = []
            for obj in objects:
                try:
                    coords = [float(obj[k]) for k in ("x_min", "y_min", "x_max", "y_max")]
                except (KeyError, TypeError, ValueError):
                    raise MalformedReply(f"{what}: an object lacks numeric x_min/y_min/x_max/y_max") from None
                if not all(math.isfinite(c) for c in coords):
                    raise MalformedReply(f"{what}: non-finite box coordinates")
                boxes.append(
                    (
                        coords[0] * image.width,
                        coords[1] * image.height,
                        coords[2] * image.width,
                        coords[3] * image.height,
                    )
                )
            return boxes

        boxes = self.retry.call(
            lambda: parse(self.http.request("POST", self.url, what, json=body, headers=self._headers))
        )
        return finalize_detections(
            boxes,
            [1.0] * len(boxes),
            image.size,
            max_boxes=self.max_boxes,
            detail=f"{self.name} {self.url} object {phrase!r}",
        )

    def close(self) -> None:
        self.http.close()


def moondream_from_options(
    options: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    transport: httpx.BaseTransport | None = None,
) -> MoondreamDetector:
    """Build the bare detector from a run config's options (see the module notes); the role
    factory (``from_options``) has checked them."""
    from model_adapters.remote_editor import HttpCaller, retry_policy
    from model_adapters.retry import RetryPolicy
    from model_adapters.transport import check_base_url, secret_from_env

    base_url = check_base_url(options.get("base_url", CLOUD_URL), "moondream")
    cloud = base_url.startswith("https://api.moondream.ai")
    key = secret_from_env(
        options, "moondream", default_env="MOONDREAM_API_KEY" if cloud else None, required=cloud
    )
    http = HttpCaller(
        concurrency=int(options.get("concurrency", 2)),
        timeout_s=float(options.get("timeout_s", 60)),
        retry=RetryPolicy(max_retries=0),
        secrets=(key,),
        key_env=options.get("api_key_env", "MOONDREAM_API_KEY" if cloud else None),
        transport=transport,
    )
    retry = retry_policy({"max_retries": 4, **options}, sleep)
    return MoondreamDetector(
        http,
        retry,
        base_url=base_url,
        api_key=key,
        max_boxes=int(options.get("max_boxes", 10)),
        max_side=int(options.get("max_side", 1024)),
        jpeg_quality=int(options.get("jpeg_quality", 90)),
    )


from_options = detector_factory("moondream", MoondreamOptions, moondream_from_options)
"""The ``moondream`` detector role: the detector paired with its segmenter (default ``box``)."""
