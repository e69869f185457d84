"""LoRA adapters through peft for the actor trainer and meter SFT (``--lora-r``, ``--lora-alpha``, ``--lora-targets``).

:func:`add_lora` wraps a causal LM so that only the adapter's low-rank matrices train; the base
weights stay frozen. The KL reference is the same model with the adapter switched off
(:class:`AdapterOff`), so no second copy of the model is held. ``save_pretrained`` of the wrapped
model writes only the adapter (``adapter_config.json`` + ``adapter_model.safetensors``), whose
``base_model_name_or_path`` is the base's model spec: ``load_actor("hf:ADAPTER_FOLDER")`` and
``load_meter`` load base + adapter by that spec (:mod:`ttg_envs.model_spec`).
:func:`export_merged` writes a plain transformers folder with the adapter merged in.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._optional import require

__all__ = ["AdapterOff", "LoraSettings", "add_lora", "export_merged", "is_lora", "load_adapter_weights"]


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter's shape.

    Attributes:
        r: the rank.
        alpha: the scale numerator (the update is ``alpha / r * B A``); None: ``2 r``.
        targets: module names to adapt (``q_proj,v_proj``...); None: every linear layer but the LM head
            (peft's ``all-linear``).
        dropout: dropout on the adapter's input.
    """

    r: int
    alpha: float | None = None
    targets: tuple[str, ...] | None = None
    dropout: float = 0.0

    @classmethod
    def from_flags(cls, r: int | None, alpha: float | None = None, targets: str | Sequence[str] | None = None) -> LoraSettings | None:
        """The settings of ``--lora-r/--lora-alpha/--lora-targets`` (None when ``r`` is 0 or None)."""
        if not r:
            return None
        if r < 0:
            raise ValueError(f"--lora-r must be positive, got {r}")
        if isinstance(targets, str):
            targets = tuple(t.strip() for t in targets.split(",") if t.strip()) or None
        return cls(int(r), alpha, tuple(targets) if targets else None)


def add_lora(model: Any, settings: LoraSettings, base: str | os.PathLike | None = None) -> Any:
    """``model`` wrapped in a peft LoRA adapter (trainable; the base frozen).

    ``base`` is the model spec the adapter will be reloaded on (written to its
    ``base_model_name_or_path``); default: the model's own ``name_or_path``.
    """
    peft = require("peft", "lora")
    on = "is_activation_checkpointing" if hasattr(type(model), "is_activation_checkpointing") else "is_gradient_checkpointing"
    if getattr(model, on, False):
        model.enable_input_require_grads()  # checkpointed blocks need an input that requires grad
    config = peft.LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha if settings.alpha is not None else 2 * settings.r,
        lora_dropout=settings.dropout,
        target_modules=list(settings.targets) if settings.targets else "all-linear",
        task_type="CAUSAL_LM",
    )
    wrapped = peft.get_peft_model(model, config)
    if base is not None:
        wrapped.peft_config["default"].base_model_name_or_path = os.fspath(base)
    return wrapped


def is_lora(model: Any) -> bool:
    """True for a peft-wrapped model."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class AdapterOff:
    """The base policy of a peft model, as the trainer's reference model: calls run with the adapter off.

    It shares every weight with the trained model (no second copy). ``eval``/``train`` switch the
    shared model's mode; ``requires_grad_`` does nothing (the adapter must stay trainable).
    """

    def __init__(self, model: Any):
        self.model = model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.model.disable_adapter():
            return self.model(*args, **kwargs)

    def parameters(self):
        """The shared model's parameters (the trainer reads their device)."""
        return self.model.parameters()

    @property
    def training(self) -> bool:
        """The shared model's mode."""
        return self.model.training

    def eval(self) -> AdapterOff:
        """Put the shared model in eval mode."""
        self.model.eval()
        return self

    def train(self, mode: bool = True) -> AdapterOff:
        """Set the shared model's mode."""
        self.model.train(mode)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> AdapterOff:
        """A no-op: freezing the reference would freeze the adapter it shares."""
        return self


def load_adapter_weights(model: Any, folder: str | os.PathLike) -> None:
    """Load a saved adapter's weights (``folder/adapter_model.safetensors``) into the peft ``model`` in place."""
    peft = require("peft", "lora")
    safetensors = require("safetensors.torch", "hf")
    weights = safetensors.load_file(str(Path(folder) / "adapter_model.safetensors"))
    result = peft.set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise ValueError(f"{folder}: adapter weights that the model has no place for: {unexpected[:3]}")


def export_merged(model: Any, tokenizer: Any, folder: str | os.PathLike) -> Path:
    """Write ``model`` with its adapter merged in as a plain transformers folder (loadable by ``hf:FOLDER``)."""
    folder = Path(folder)
    merged = copy.deepcopy(model).merge_and_unload()
    merged.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
