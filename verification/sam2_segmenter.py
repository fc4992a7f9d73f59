"""SAM2 through transformers (``Sam2Model`` / ``Sam2Processor``) with box prompts.

All boxes of one image go through the model in one forward pass (one image embedding).
With ``multimask_output`` (default) SAM2 proposes three masks per box; the one with the highest
predicted IoU is kept. Masks are brought back to the image's size by the processor's
``post_process_masks`` and binarised at ``mask_threshold`` (logit 0 = probability 0.5).

``model`` is a Hugging Face id (e.g. ``facebook/sam2.1-hiera-large``) or a local folder holding
both the model and its processor; torch and transformers are imported when the segmenter is
built. Calls are serialised with a lock (one model, many verify threads).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from PIL import Image

from verification.localization import Box, weights_identity

__all__ = ["Sam2Segmenter"]


class Sam2Segmenter:
    """A ``Segmenter`` on SAM2 (transformers).

    Parameters
    ----------
    model : str
        Hub id or local folder (model + processor).
    device : str
        torch device ("cpu", "cuda", "cuda:1", "mps").
    mask_threshold : float
        Logit threshold for binarising the masks.
    multimask_output : bool
        Ask for three masks per box and keep the best by predicted IoU; False asks for one.
    revision : str, optional
        Hub revision (commit, tag or branch).
    dtype : str, optional
        torch dtype name for the weights ("float16", "bfloat16"); default float32.
    """

    name = "sam2"

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        mask_threshold: float = 0.0,
        multimask_output: bool = True,
        revision: str | None = None,
        dtype: str | None = None,
    ) -> None:
        import torch
        from transformers import Sam2Model, Sam2Processor

        self.torch = torch
        kwargs: dict[str, object] = {}
        if revision:
            kwargs["revision"] = revision
        model_kwargs = dict(kwargs)
        if dtype:
            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ValueError(f"dtype must name a torch dtype such as float16, got {dtype!r}")
            model_kwargs["dtype"] = getattr(torch, dtype)
        self.model_id = str(model)
        self.processor = Sam2Processor.from_pretrained(self.model_id, **kwargs)
        self.model = Sam2Model.from_pretrained(self.model_id, **model_kwargs).to(device).eval()
        self.device = device
        self.mask_threshold = float(mask_threshold)
        self.multimask_output = bool(multimask_output)
        self.revision = revision
        self._lock = threading.Lock()

    def identity(self) -> dict[str, object]:
        return weights_identity(
            self.name,
            self.model_id,
            self.revision,
            mask_threshold=self.mask_threshold,
            multimask_output=self.multimask_output,
        )

    def segment(self, image: Image.Image, boxes: Sequence[Box]) -> list[np.ndarray]:
        """One boolean H×W mask per box (the best of SAM2's proposals by predicted IoU)."""
        if not boxes:
            return []
        torch = self.torch
        rgb = image.convert("RGB")
        w, h = rgb.size
        prompt = [[[float(v) for v in b] for b in boxes]]  # [image, box, xyxy]
        with self._lock, torch.inference_mode():
            inputs = self.processor(images=rgb, input_boxes=prompt, return_tensors="pt")
            original_sizes = inputs["original_sizes"]
            model_inputs = {k: v.to(self.device) for k, v in inputs.items() if k != "original_sizes"}
            if "pixel_values" in model_inputs:
                model_inputs["pixel_values"] = model_inputs["pixel_values"].to(self.model.dtype)
            out = self.model(**model_inputs, multimask_output=self.multimask_output)
            masks = self.processor.post_process_masks(
                out.pred_masks.float().cpu(),
                original_sizes,
                mask_threshold=self.mask_threshold,
                binarize=True,
            )[0]  # (n_boxes, n_masks, H, W)
            iou = out.iou_scores.float().cpu()[0]  # (n_boxes, n_masks)
        best = iou.argmax(dim=-1)
        result = []
        for i in range(len(boxes)):
            m = masks[i, int(best[i])].numpy().astype(bool)
            if m.shape != (h, w):  # defensive: post-processing should already give the image's size
                raise RuntimeError(f"SAM2 returned a {m.shape} mask for a {h}×{w} image")
            result.append(m)
        return result
