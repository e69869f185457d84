"""``load_meter(spec)``: a meter from a spec string or a saved folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..model_spec import ModelNotFoundError, looks_local
from ..registry import ENV_SPECS
from .base import ProgressMeter
from .hf import METER_CONFIG
from .ready import ready_meter_path

_SCHEMES = ("hf", "transformers", "vllm", "openai", "encoder")
# A spec shaped like this project's env ids (``ttg/Name-v0``) means a shipped meter, never a hub model.
_ENV_ID = re.compile(r"^ttg(-toy)?/[\w.-]+-v\d+$")


def load_meter(spec: str | os.PathLike | ProgressMeter, **kwargs: Any) -> ProgressMeter:
    """Build a meter from ``spec``; ``kwargs`` go to the backend's constructor.

    - a meter object: returned as is;
    - a registered env id (``ttg/ALFWorld-v0``, ...): the meter shipped for it (:mod:`ttg_envs.meters.ready`);
    - ``hf:<model-spec>`` (or ``transformers:``): :class:`~ttg_envs.meters.hf.TransformersMeter`; a hub
      id, a local folder or a GGUF file, with options ``?revision=...&gguf_file=...&dtype=...``
      (:mod:`ttg_envs.model_spec`);
    - ``vllm:<name-or-path>``: :class:`~ttg_envs.meters.vllm.VLLMMeter`;
    - ``openai:<base-url>#<model>``: :class:`~ttg_envs.meters.http.OpenAIMeter`;
    - ``encoder:<path>``: :class:`~ttg_envs.meters.encoder.EncoderMeter` saved folder (an
      :class:`~ttg_envs.meters.ensemble.EnsembleMeter` where its ``meter.json`` says ``ensemble``);
    - a folder with ``meter.json``: the backend its ``kind`` names (``transformers``, ``encoder`` or ``ensemble``);
      any other folder or name: a causal LM for the transformers backend.

    A spec that can only be a local path and names nothing raises
    :class:`~ttg_envs.model_spec.ModelNotFoundError` at once; a hub id not in the local cache fails
    after one hub request (at once with ``HF_HUB_OFFLINE=1``).
    """
    if not isinstance(spec, (str, os.PathLike)):
        if hasattr(spec, "estimate"):
            return spec
        raise TypeError(f"cannot make a meter from {type(spec).__name__}")
    scheme, text = _parse(os.fspath(spec))
    if scheme == "ready":
        return _from_scheme("encoder", str(ready_meter_path(text)), kwargs)
    if scheme:
        return _from_scheme(scheme, text, kwargs)
    _check_local(text)
    config = Path(text) / METER_CONFIG
    kind = json.loads(config.read_text()).get("kind", "transformers") if config.is_file() else "transformers"
    return _from_scheme("encoder" if kind in ("encoder", "ensemble") else "hf", text, kwargs)


def _parse(text: str) -> tuple[str | None, str]:
    """(scheme, rest) of a spec: ``"ready"`` and the env id for a registered env id, a scheme of
    :data:`_SCHEMES` and what follows it, or None and the text for a path or hub id. An existing
    path always wins (a folder may be named ``hf:x``)."""
    if Path(text).exists():
        return None, text
    if text in ENV_SPECS or _ENV_ID.match(text):
        return "ready", text
    scheme, sep, rest = text.partition(":")
    return (scheme, rest) if sep and scheme in _SCHEMES else (None, text)


def _from_scheme(scheme: str, rest: str, kwargs: dict[str, Any]) -> ProgressMeter:
    if scheme in ("hf", "transformers"):
        from .hf import TransformersMeter

        return TransformersMeter.from_pretrained(rest, **kwargs)
    if scheme == "vllm":
        from .vllm import VLLMMeter

        return VLLMMeter(rest, **kwargs)
    if scheme == "openai":
        from .http import OpenAIMeter

        base_url, sep, model = rest.rpartition("#")
        if not sep or not base_url or not model:
            raise ValueError(f"openai meter spec must be openai:<base-url>#<model>, got {'openai:' + rest!r}")
        return OpenAIMeter(base_url, model, **kwargs)
    from .encoder import EncoderMeter

    config = Path(rest) / METER_CONFIG
    if not config.is_file():
        raise ModelNotFoundError(f"encoder meter not found: {rest!r} (no {METER_CONFIG} in {Path(rest).absolute()})")
    if json.loads(config.read_text()).get("kind") == "ensemble":
        from .ensemble import EnsembleMeter

        return EnsembleMeter.from_pretrained(rest, **kwargs)
    return EncoderMeter.from_pretrained(rest, **kwargs)


def check_meter_spec(spec: str | os.PathLike, *, hub: bool = False) -> None:
    """Raise at once if ``spec`` cannot load; loads nothing.

    A local path that does not exist (``hf:``/``encoder:`` specs included) raises
    :class:`~ttg_envs.model_spec.ModelNotFoundError`, an env id with no shipped meter a ``LookupError``,
    an ``openai:`` spec without ``#<model>`` a ``ValueError``. With ``hub``, a hub id is also looked up
    (:func:`~ttg_envs.model_spec.resolve_model`: the local cache, then at most one hub request).
    """
    scheme, text = _parse(os.fspath(spec))
    if scheme == "ready":
        ready_meter_path(text)
    elif scheme == "encoder":
        _check_local(text)
        if not (Path(text) / METER_CONFIG).is_file():
            raise ModelNotFoundError(f"encoder meter not found: {text!r} (no {METER_CONFIG} in {Path(text).absolute()})")
    elif scheme == "openai":
        base_url, sep, model = text.rpartition("#")
        if not sep or not base_url or not model:
            raise ValueError(f"openai meter spec must be openai:<base-url>#<model>, got {'openai:' + text!r}")
    elif scheme in (None, "hf", "transformers"):
        if scheme is None and ":" in text.partition("?")[0] and not Path(text).exists():
            name = text.partition(":")[0]
            raise ModelNotFoundError(
                f"meter not found: {text!r} (no such folder, and {name + ':'!r} is no meter scheme: {', '.join(s + ':' for s in _SCHEMES)})"
            )
        _check_local(text)
        if hub and not (Path(text.partition("?")[0]).expanduser() / METER_CONFIG).is_file():
            from ..model_spec import resolve_model

            resolve_model(text)


def _check_local(text: str) -> None:
    """Fail at once on a spec that can only be a local path and names nothing."""
    location = text.partition("?")[0]
    if looks_local(location) and not Path(location).expanduser().exists():
        raise ModelNotFoundError(f"meter not found: {location!r} (no such file or folder: {Path(location).expanduser().absolute()})")
