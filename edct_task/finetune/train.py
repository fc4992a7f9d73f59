"""``edct finetune EXPORT --model DIR --output OUT``: LoRA / Q-LoRA on counterfactual pairs (paper §4.6).

Steps:

1. Pairs (export or run folder) and their gold answers (calibration world, or ``--labels``);
   pairs nobody labels are left out and counted. Split by sample into train and held-out.
2. The model: on CUDA, 4-bit NF4 (``bitsandbytes``, double quantisation, bf16 compute) wrapped for
   k-bit training — Q-LoRA; on CPU (or with ``quantize="never"``) the weights as they are — plain
   LoRA. LoRA adapters (``peft``) on the language model's attention and MLP projections; the
   vision tower stays frozen and unadapted.
3. Before training: greedy accuracy and per-item loss on originals and counterfactuals (train and
   held-out), the counterfactual/original loss ratio (the paper: 0.7124 / 0.1792 ≈ 4×), and the
   attention localization on held-out pairs (epoch 0).
4. Training with TRL's ``SFTTrainer`` on prompt–completion rows with the image (loss on the gold
   answer only); the loss of every step is kept. After each epoch: held-out accuracy and
   localization (the paper's Fig. 9 as numbers).
5. After: accuracy and loss on held-out and train items; the adapter (``OUT/adapter``), the report
   (``OUT/report/``) and ``OUT/finetune.json``.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from edct_task.attention.pairs import read_pairs
from edct_task.attention.probe import VLMProbe
from edct_task.bench_data.format import BenchDataError
from edct_task.bench_data.output import write_folder
from edct_task.core.errors import ConfigError
from edct_task.finetune.data import AnswerOnlyLabels, Item, items_of, split_pairs, trl_row
from edct_task.finetune.evaluate import accuracy, item_losses, localization_summary, side_numbers
from edct_task.finetune.labels import gold_labels

__all__ = ["FINETUNE_VERSION", "LORA_TARGETS", "FinetuneRequest", "run_finetune"]

log = logging.getLogger(__name__)

FINETUNE_VERSION = 1
LORA_TARGETS = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
"""peft ``target_modules`` (a full-match regex): the text decoder's projections, not the vision tower's."""


@dataclass(frozen=True)
class FinetuneRequest:
    source: Path
    model: Path
    out: Path
    labels: Path | None = None
    held_out: float = 0.25
    epochs: int = 3
    learning_rate: float = 2e-4
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    batch_size: int = 1
    grad_accum: int = 1
    train_on: Literal["both", "counterfactual"] = "both"
    quantize: Literal["auto", "never"] = "auto"
    layers: str | None = None
    device: str | None = None
    max_pairs: int | None = None
    max_new_tokens: int = 64
    seed: int = 0
    overwrite: bool = False


def load_for_training(request: FinetuneRequest) -> tuple[Any, Any, str]:
    """(model, processor, mode): Q-LoRA-ready 4-bit NF4 on CUDA, full-precision weights otherwise."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    cuda = torch.cuda.is_available() and (request.device or "cuda").startswith("cuda")
    try:
        processor = AutoProcessor.from_pretrained(str(request.model))
        if cuda and request.quantize == "auto":
            from peft import prepare_model_for_kbit_training
            from transformers import BitsAndBytesConfig

            if importlib.util.find_spec("bitsandbytes") is None:
                raise ConfigError(
                    "Q-LoRA on CUDA needs bitsandbytes: pip install 'edct-bench[qlora]' (or --no-quantize)"
                )

            quant = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
            )
            model = AutoModelForImageTextToText.from_pretrained(
                str(request.model), quantization_config=quant, dtype=torch.bfloat16, device_map={"": 0}
            )
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
            return model, processor, "qlora-nf4"
        model = AutoModelForImageTextToText.from_pretrained(
            str(request.model),
            dtype=torch.bfloat16 if cuda else torch.float32,
            device_map={"": 0} if cuda else "cpu",
        )
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--model {request.model}: cannot load a vision-language model ({exc})") from None
    return model, processor, "lora"


def _check(request: FinetuneRequest) -> None:
    missing = [name for name in ("peft", "trl") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"edct finetune needs {' and '.join(missing)}: pip install 'edct-bench[finetune]' "
            "(or '[qlora]' for 4-bit Q-LoRA on CUDA)"
        )
    if Path(request.out).exists() and not request.overwrite:
        raise BenchDataError(f"{request.out}: already exists (pass --overwrite to replace it)")
    if not 0.0 < request.held_out < 1.0:
        raise ConfigError(f"--held-out {request.held_out}: give a fraction in (0, 1)")
    if request.epochs < 1:
        raise ConfigError(f"--epochs {request.epochs}: train at least one epoch")


def _items(pairs: list[Any], gold: dict[str, Any]) -> list[Item]:
    return items_of(pairs, gold, "original") + items_of(pairs, gold, "counterfactual")


def run_finetune(
    request: FinetuneRequest, *, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Everything ``edct finetune`` does; returns the ``finetune.json`` document."""
    _check(request)
    say = progress or (lambda _msg: None)
    pairs, kind = read_pairs(request.source)
    if request.max_pairs is not None:
        pairs = pairs[: request.max_pairs]
    gold, unlabelled = gold_labels(pairs, request.labels)
    labelled = [p for p in pairs if p.id in gold]
    if len({p.sample_id for p in labelled}) < 2:
        raise BenchDataError(
            f"{request.source}: {len(labelled)} labelled pairs from fewer than two samples; fine-tuning "
            "needs a train and a held-out sample (calibration pairs are labelled by the world; give "
            "--labels for others)"
        )
    train_pairs, test_pairs = split_pairs(labelled, request.held_out, request.seed)
    train_items, test_items = _items(train_pairs, gold), _items(test_pairs, gold)
    fit_items = [it for it in train_items if request.train_on == "both" or it.side == "counterfactual"]

    meta = {
        "source": str(Path(request.source).absolute()),
        "source_kind": kind,
        "labels": {
            "file": None if request.labels is None else str(request.labels),
            "sources": sorted({g.source for g in gold.values()}),
            "labelled_pairs": len(labelled),
            "unlabelled_pairs": unlabelled,
        },
    }
    document: dict[str, Any] = {}

    def write(tmp: Path) -> None:
        document.update(_train(request, tmp, train_items, test_items, fit_items, test_pairs, meta, say))

    write_folder(request.out, write, overwrite=request.overwrite)
    return document


def _train(
    request: FinetuneRequest,
    tmp: Path,
    train_items: list[Item],
    test_items: list[Item],
    fit_items: list[Item],
    test_pairs: list[Any],
    meta: dict[str, Any],
    say: Callable[[str], None],
) -> dict[str, Any]:
    import datasets
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from edct_task.finetune.report import write_report

    model, processor, mode = load_for_training(request)
    lora = LoraConfig(
        r=request.lora_r,
        lora_alpha=request.lora_alpha,
        lora_dropout=request.lora_dropout,
        target_modules=LORA_TARGETS,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    cuda = next(model.parameters()).device.type == "cuda"
    config = SFTConfig(
        output_dir=str(tmp / "trainer"),
        num_train_epochs=request.epochs,
        learning_rate=request.learning_rate,
        per_device_train_batch_size=request.batch_size,
        gradient_accumulation_steps=request.grad_accum,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=request.seed,
        data_seed=request.seed,
        use_cpu=not cuda,
        bf16=cuda,
        activation_checkpointing=cuda,  # TRL defaults it on; a tiny CPU model gains nothing from it
        activation_checkpointing_kwargs={"use_reentrant": False} if cuda else None,
        max_length=None,  # never cut image tokens
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    train_set = datasets.Dataset.from_list([trl_row(it) for it in fit_items])
    trainer = SFTTrainer(model=model, args=config, train_dataset=train_set, processing_class=processor)
    trainer.remove_callback(PrinterCallback)  # the step losses go to finetune.json, not to stdout
    tokenizer = processor.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    trainer.data_collator = AnswerOnlyLabels(
        trainer.data_collator, end if isinstance(end, int) and end >= 0 else tokenizer.eos_token_id
    )
    probe = VLMProbe(model, processor, layers=request.layers)

    def evaluate(
        items: list[Item], *, answers: bool = True
    ) -> tuple[list[dict[str, Any]] | None, list[float]]:
        model.eval()
        got = accuracy(probe, items, max_new_tokens=request.max_new_tokens) if answers else None
        return got, item_losses(model, trainer.data_collator, items)

    per_epoch: list[dict[str, Any]] = []

    def measure(epoch: int) -> None:
        was_training = model.training
        model.eval()
        answers = accuracy(probe, test_items, max_new_tokens=request.max_new_tokens)
        entry = {
            "epoch": epoch,
            "held_out": side_numbers(test_items, answers, None),
            "localization": localization_summary(
                probe, test_pairs, max_new_tokens=request.max_new_tokens, seed=request.seed
            ),
        }
        per_epoch.append(entry)
        loc = entry["localization"]["localization"]
        say(
            f"epoch {epoch}: held-out localization original {loc['original']['estimate']}, "
            f"counterfactual {loc['counterfactual']['estimate']}"
        )
        model.train(was_training)

    class EpochProbe(TrainerCallback):
        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            measure(round(state.epoch))

    say(f"before training: {len(train_items)} train and {len(test_items)} held-out items ({mode})")
    before_train = evaluate(train_items)
    before_test = evaluate(test_items)
    measure(0)
    trainer.add_callback(EpochProbe())
    started = time.monotonic()
    say(f"training {request.epochs} epochs on {len(fit_items)} items")
    trainer.train()
    runtime = time.monotonic() - started
    after_train = evaluate(train_items)
    after_test = evaluate(test_items)
    model.save_pretrained(str(tmp / "adapter"))
    processor.save_pretrained(str(tmp / "adapter"))
    import shutil

    shutil.rmtree(tmp / "trainer", ignore_errors=True)

    def items_table(items: list[Item], split: str, before: Any, after: Any) -> list[dict[str, Any]]:
        return [
            {
                "key": it.key,
                "split": split,
                "side": it.side,
                "gold": it.gold,
                "answer_before": before[0][i]["answer"],
                "correct_before": before[0][i]["correct"],
                "answer_after": after[0][i]["answer"],
                "correct_after": after[0][i]["correct"],
                "loss_before": before[1][i],
                "loss_after": after[1][i],
            }
            for i, it in enumerate(items)
        ]

    document: dict[str, Any] = {
        "finetune_version": FINETUNE_VERSION,
        "model": str(request.model),
        **meta,
        "mode": mode,
        "device": str(next(model.parameters()).device),
        "adapter": "adapter",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(request).items()},
        "lora": {
            "r": lora.r,
            "alpha": lora.lora_alpha,
            "dropout": lora.lora_dropout,
            "targets": LORA_TARGETS,
        },
        "trainable_parameters": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "layers": list(probe.layers),
        "split": {
            "seed": request.seed,
            "held_out_fraction": request.held_out,
            "train_samples": len({it.pair.sample_id for it in train_items}),
            "held_out_samples": len({it.pair.sample_id for it in test_items}),
            "held_out_pairs": [p.id for p in test_pairs],
            "train_items": len(train_items),
            "held_out_items": len(test_items),
            "fit_items": len(fit_items),
        },
        "before": {
            "train": side_numbers(train_items, *before_train),
            "held_out": side_numbers(test_items, *before_test),
            "all": side_numbers(
                train_items + test_items, before_train[0] + before_test[0], before_train[1] + before_test[1]
            ),
        },
        "loss_curve": [
            {"step": e["step"], "epoch": e["epoch"], "loss": e["loss"]}
            for e in trainer.state.log_history
            if "loss" in e
        ],
        "per_epoch": per_epoch,
        "after": {
            "train": side_numbers(train_items, *after_train),
            "held_out": side_numbers(test_items, *after_test),
        },
        "runtime_s": runtime,
        "items": items_table(train_items, "train", before_train, after_train)
        + items_table(test_items, "held_out", before_test, after_test),
    }
    if torch.cuda.is_available():
        document["peak_cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    write_report(tmp, document)
    return document
