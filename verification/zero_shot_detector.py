"""Open-vocabulary detection through transformers (``AutoModelForZeroShotObjectDetection``).

Two families, chosen by the loaded model's ``model_type``:

- **OWLv2 / OWL-ViT** (``owlv2``, ``owlvit``): the target is one text query
  (``query_template``, default ``"a photo of {target}"``); boxes come from
  ``post_process_grounded_object_detection`` with ``threshold`` (default 0.1). OWLv2's processor
  pads the image to a square at the bottom/right, so boxes are scaled against the padded side
  and then clipped to the image.
- **Grounding DINO** (``grounding-dino``, ``mm-grounding-dino``): the query is the lower-cased
  phrase ending in "." as the model was trained; ``threshold`` (box score, default 0.3) and
  ``text_threshold`` (token score, default 0.25).

``model`` is a Hugging Face id (``google/owlv2-base-patch16-ensemble``,
``IDEA-Research/grounding-dino-base``) or a local folder with model + processor. Calls are
serialised with a lock.
"""

from __future__ import annotations

import threading

from PIL import Image

from verification.detection import Detections, finalize_detections, normalize_target
from verification.localization import weights_identity

__all__ = ["FAMILIES", "ZeroShotDetector"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "owlv2": ("owlv2", "owlvit"),
    "grounding-dino": ("grounding-dino", "mm-grounding-dino"),
}
DEFAULT_THRESHOLDS = {"owlv2": 0.1, "grounding-dino": 0.3}


class ZeroShotDetector:
    """A ``Detector`` on a transformers zero-shot object-detection model.

    Parameters
    ----------
    model : str
        Hub id or local folder (model + processor).
    family : {"owlv2", "grounding-dino"}
        Expected model family; a model of another type is refused.
    device : str
        torch device.
    threshold : float, optional
        Box score threshold (defaults: owlv2 0.1, grounding-dino 0.3).
    text_threshold : float
        Grounding DINO's token threshold (ignored by OWLv2).
    max_boxes : int
        Keep at most this many boxes (best first).
    query_template : str, optional
        Text query with ``{target}``; default ``"a photo of {target}"`` for OWLv2 and
        ``"{target}."`` for Grounding DINO.
    revision : str, optional
        Hub revision.
    """

    def __init__(
        self,
        model: str,
        *,
        family: str,
        device: str = "cpu",
        threshold: float | None = None,
        text_threshold: float = 0.25,
        max_boxes: int = 10,
        query_template: str | None = None,
        revision: str | None = None,
    ) -> None:
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
        thr = DEFAULT_THRESHOLDS[family] if threshold is None else float(threshold)
        if not 0.0 <= thr <= 1.0 or not 0.0 <= text_threshold <= 1.0:
            raise ValueError(f"threshold and text_threshold must be in [0, 1], got {thr}, {text_threshold}")
        if max_boxes < 1:
            raise ValueError(f"max_boxes must be >= 1, got {max_boxes}")
        template = query_template or ("a photo of {target}" if family == "owlv2" else "{target}.")
        if "{target}" not in template:
            raise ValueError(f"query_template must contain {{target}}, got {template!r}")
        import torch
        from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

        kwargs = {"revision": revision} if revision else {}
        self.torch = torch
        self.model_id = str(model)
        self.model = (
            AutoModelForZeroShotObjectDetection.from_pretrained(self.model_id, **kwargs).to(device).eval()
        )
        model_type = str(getattr(self.model.config, "model_type", ""))
        if model_type not in FAMILIES[family]:
            raise ValueError(
                f"{self.model_id} is a {model_type!r} model, not {family} "
                f"(expected model_type {' or '.join(FAMILIES[family])})"
            )
        self.processor = AutoProcessor.from_pretrained(self.model_id, **kwargs)
        self.family = family
        self.name = family
        self.device = device
        self.threshold = thr
        self.text_threshold = float(text_threshold)
        self.max_boxes = int(max_boxes)
        self.query_template = template
        self.revision = revision
        self._lock = threading.Lock()

    def identity(self) -> dict[str, object]:
        return weights_identity(
            self.name,
            self.model_id,
            self.revision,
            threshold=self.threshold,
            text_threshold=self.text_threshold,
            max_boxes=self.max_boxes,
            query_template=self.query_template,
        )

    def query(self, target: str) -> str:
        """The text sent to the model for ``target``."""
        phrase = normalize_target(target)
        q = self.query_template.format(target=phrase)
        return q.lower() if self.family == "grounding-dino" else q

    def detect(self, image: Image.Image, target: str) -> Detections:
        rgb = image.convert("RGB")
        w, h = rgb.size
        q = self.query(target)
        if not normalize_target(target):
            return Detections(detail=f"{self.name}: empty target, nothing to look for")
        torch = self.torch
        with self._lock, torch.inference_mode():
            if self.family == "owlv2":
                inputs = self.processor(text=[[q]], images=rgb, return_tensors="pt", truncation=True)
                inputs = inputs.to(self.device)
                out = self.model(**inputs)
                side = max(w, h)  # OWLv2 pads to a square at bottom/right
                res = self.processor.post_process_grounded_object_detection(
                    out, threshold=0.0, target_sizes=[(side, side)]
                )[0]
            else:
                inputs = self.processor(images=rgb, text=q, return_tensors="pt").to(self.device)
                out = self.model(**inputs)
                res = self.processor.post_process_grounded_object_detection(
                    out,
                    inputs["input_ids"],
                    threshold=0.0,
                    text_threshold=self.text_threshold,
                    target_sizes=[(h, w)],
                )[0]
        boxes = res["boxes"].float().cpu().tolist()
        scores = res["scores"].float().cpu().tolist()
        return finalize_detections(
            boxes,
            scores,
            (w, h),
            threshold=self.threshold,
            max_boxes=self.max_boxes,
            detail=f"{self.name} {self.model_id} query {q!r}",
        )
