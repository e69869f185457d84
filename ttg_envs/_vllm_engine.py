"""Starting vLLM's offline engine (``vllm.LLM``) from any script, guarded by ``__main__`` or not.

vLLM runs its engine core in a child process started with ``spawn`` (always on a CPU, and on a
GPU once CUDA is initialised). A spawned child imports the parent's main script again, so a
script that builds an engine at module level, outside ``if __name__ == "__main__":``, would
build it again in the child and fail there with an unrelated error (a model path made in the
parent's temp folder is not found, and vLLM then asks the hub). :func:`start_llm` runs the engine
in this process when the main script has no guard at all, and says what to add when a guarded
script builds an engine outside its guard.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["LORA_RANKS", "adapter_rank", "lora_engine_kwargs", "start_llm", "unguarded_main_script"]

log = logging.getLogger(__name__)
IN_PROCESS_VAR = "VLLM_ENABLE_V1_MULTIPROCESSING"
#: The ranks vLLM's ``max_lora_rank`` accepts (vllm.config.lora.MaxLoRARanks, vLLM 0.32).
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def unguarded_main_script() -> Path | None:
    """The main script's path when its source never tests ``__main__`` (every line runs on import), else None."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path:
        return None  # an interactive session, ``python -c``, a notebook: spawn does not re-run them
    if not Path(path).is_file():
        return Path(path)  # ``python - <<EOF`` ("<stdin>"): spawn would re-run a file that is not there
    try:
        source = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return None if "__main__" in source else Path(path)


def start_llm(vllm: ModuleType, owner: str, **kwargs: Any) -> Any:
    """``vllm.LLM(**kwargs)`` for ``owner`` (the class name shown in errors), safe from a plain script.

    Raises RuntimeError (naming the fix) when called while a spawned child re-imports the main
    script; runs the engine in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) when the main
    script has no ``__main__`` guard and that variable is unset.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        main = getattr(sys.modules.get("__main__"), "__file__", "your script")
        raise RuntimeError(
            f"{owner} was created while a spawned process (vLLM's engine) re-ran {main} on import. Put the code "
            f'that creates it under `if __name__ == "__main__":`, or set {IN_PROCESS_VAR}=0 to run the engine '
            "in this process."
        )
    script = unguarded_main_script()
    if script is not None and IN_PROCESS_VAR not in os.environ:
        log.warning(
            '%s has no `if __name__ == "__main__":` guard: vLLM\'s engine runs in this process (%s=0); '
            "add the guard for the multi-process engine.",
            script,
            IN_PROCESS_VAR,
        )
        os.environ[IN_PROCESS_VAR] = "0"
    return vllm.LLM(**kwargs)


def lora_engine_kwargs(rank: int) -> dict[str, Any]:
    """``vllm.LLM`` settings that serve LoRA adapters of rank ``rank``: ``enable_lora`` and the
    smallest ``max_lora_rank`` vLLM accepts that holds it."""
    fits = [r for r in LORA_RANKS if r >= rank]
    if not fits:
        raise ValueError(f"LoRA rank {rank} is above vLLM's largest max_lora_rank ({LORA_RANKS[-1]})")
    return {"enable_lora": True, "max_lora_rank": fits[0]}


def adapter_rank(folder: str | os.PathLike) -> int:
    """The rank ``r`` of the peft adapter saved in ``folder`` (its ``adapter_config.json``)."""
    import json

    config = json.loads((Path(folder) / "adapter_config.json").read_text())
    ranks = [config["r"], *(config.get("rank_pattern") or {}).values()]
    return int(max(ranks))
