"""The ``info`` fields that ttg-envs writes: their names are API, documented here and in the README.

``INFO_FIELDS`` maps each field name to ``(writer, meaning)``. A test checks that the README's
table lists exactly these fields, so this dict is the one place to add a new one.
"""

from __future__ import annotations

INFO_FIELDS: dict[str, tuple[str, str]] = {
    "task": ("every env, at reset", "dict with the task `id`, `type` and `split` (plus env extras such as `source`)."),
    "success": ("every env", "True only when the env's own checker verified the task as won."),
    "action_valid": ("every env", "True when the text parsed into an action the env accepts (well formed and admissible)."),
    "state_key": ("every env", "Hash of the canonical engine state: equal keys mean equal states (branch checks, GiGPO grouping)."),
    "elapsed_steps": ("every env", "Number of assistant actions taken so far in the episode."),
    "error": ("every env, on an invalid action", "What was wrong with the action, in words (also shown in the observation)."),
    "admissible_commands": ("ttg/ALFWorld-v0", "The commands the engine accepts in the new state, sorted."),
    "assistant_tokens": ("TokenCounter", "Tokens the actor generated for this action (reasoning, tool calls, answer; no template or observation tokens)."),
    "assistant_tokens_total": ("TokenCounter", "Sum of `assistant_tokens` over the episode so far."),
    "ttg_labels": ("TokenCounter, at episode end", "Recorded Token-to-Go of every decision step (paper eq. 1); None when the episode failed."),
}
