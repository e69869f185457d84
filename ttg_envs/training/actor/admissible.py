"""A rollout generator that samples only admissible commands: a structured action interface for tiny policies.

:class:`AdmissibleGenerator` is a :class:`~ttg_envs.training.actor.rollout.TokenGenerator` over a
transformers causal LM whose sampling is masked, token by token, to the tokenizations of the
commands the prompt's current observation lists (ALFWorld's ``Admissible actions: a, b, c`` line),
each followed by the end-of-turn token. A policy that has never seen the env then acts like a
(model-weighted) random admissible policy instead of writing text the env rejects, which lets a
small model built from a config learn from RL on a CPU.

Only sampling changes: the trainer still scores and trains the generated ids with the model's
unmasked log-probabilities (its loss, credit and rollout code are untouched), so the masked-out
mass just never gets sampled; the PPO ratio starts at 1 as with any generator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .rollout import HFGenerator

__all__ = ["AdmissibleGenerator", "admissible_from_text"]

_ADMISSIBLE = re.compile(r"Admissible actions: ([^\n]*)")


def admissible_from_text(text: str) -> list[str]:
    """The commands of the last ``Admissible actions: a, b, c`` line of ``text`` (empty when none)."""
    lines = _ADMISSIBLE.findall(text)
    return [c.strip() for c in lines[-1].split(",") if c.strip()] if lines else []


class AdmissibleGenerator(HFGenerator):
    """Samples one admissible command per prompt (token ids in, generated ids incl. end-of-turn out).

    Args:
        model, tokenizer: the policy (a transformers causal LM) and its tokenizer.
        commands: reads the admissible commands from a prompt's decoded text (default
            :func:`admissible_from_text`); a prompt with none is sampled unmasked.

    Sampling draws from torch's global RNG (the trainer seeds it per step); ``temperature`` 0 is
    greedy. ``top_p`` is applied by transformers after the mask.
    """

    def __init__(self, model: Any, tokenizer: Any, commands: Callable[[str], list[str]] = admissible_from_text):
        self.model = model
        self.tokenizer = tokenizer
        self.commands = commands
        self.eos = tokenizer.eos_token_id
        self.stop_ids = {self.eos}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self._ids: dict[str, tuple[int, ...]] = {}

    def _command_ids(self, command: str) -> tuple[int, ...]:
        ids = self._ids.get(command)
        if ids is None:
            ids = self._ids[command] = tuple(self.tokenizer(command, add_special_tokens=False)["input_ids"]) + (self.eos,)
        return ids

    def _trie(self, prompt: Sequence[int]) -> dict | None:
        commands = self.commands(self.tokenizer.decode(list(prompt), skip_special_tokens=False))
        if not commands:
            return None
        root: dict = {}
        for command in commands:
            node = root
            for token in self._command_ids(command):
                node = node.setdefault(token, {})
        return root

    def _generate_kwargs(self, prompts: Sequence[Sequence[int]], width: int) -> dict[str, Any]:
        """Mask decoding to the admissible commands read from each prompt."""
        tries = [self._trie(p) for p in prompts]
        every = list(range(len(self.tokenizer)))

        def allowed(row: int, sequence: Any) -> list[int]:
            node = tries[row]
            if node is None:
                return every
            for token in sequence[width:].tolist():
                node = node.get(token)
                if node is None:  # past the end-of-turn token (a finished row): anything
                    return [self.pad_id]
            return list(node) or [self.pad_id]

        return {"eos_token_id": self.eos, "prefix_allowed_tokens_fn": allowed}
