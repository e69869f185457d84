"""The ``info`` fields that ttg-envs writes: their names are API, documented here and in the README.

``INFO_FIELDS`` maps each field name to ``(writer, meaning)``. A test checks that the README's
table lists exactly these fields, so this dict is the one place to add a new one.
"""

from __future__ import annotations

#: Step flags that runs count per episode (``EpisodeResult.counts``): info field -> (the count's
#: name in reports, the phrase of a run's last line). A report shows a count for the envs whose
#: registry record lists the field in ``counted_info``.
EPISODE_COUNTS: dict[str, tuple[str, str]] = {
    "planner_timeout": ("planner_timeouts", "planner time limit hit {} times"),
}

INFO_FIELDS: dict[str, tuple[str, str]] = {
    "task": ("every env, at reset", "dict with the task `id`, `type` and `split` (plus env extras such as `source`)."),
    "success": ("every env", "True only when the env's own checker verified the task as won."),
    "action_valid": (
        "every env",
        (
            "True when the text parsed into an action the env accepts (well formed and admissible). One rule in every env and scoring mode: an empty reply (nothing after the reasoning), a malformed call and a call to no tool of the task are invalid steps, whatever the scoring does with them next (BFCL official scoring keeps the harness verdict: there such a step still ends the turn or is scored as no call)."
        ),
    ),
    "state_key": ("every env", "Hash of the canonical engine state: equal keys mean equal states (branch checks, GiGPO grouping)."),
    "elapsed_steps": ("every env", "Number of assistant actions taken so far in the episode."),
    "error": (
        "every env, on an invalid action",
        "What was wrong with the action, in words (also shown in the observation; under BFCL official scoring the observation stays what the harness shows).",
    ),
    "admissible_commands": ("ttg/ALFWorld-v0", "The commands the engine accepts in the new state, sorted."),
    "retrieved_ids": ("ttg/PaperSearchQA-v0, on a search step", "Corpus ids of the passages the search returned, best first."),
    "verifier_result": (
        "ttg/AWM-v0, at the final answer",
        'What the scenario\'s verifier returned (`{"result": "complete"}` on success), or `{"error": ...}` when it failed to run.',
    ),
    "tools": (
        "tool envs (ttg/BFCL-v0, ttg/Tau2-v0, ttg/AWM-v0), at reset and when the tool set changes",
        "The tools the assistant can call, in OpenAI function format (also rendered in the system prompt).",
    ),
    "evaluation": (
        "tool envs, when the verdict is reached",
        "The benchmark's own checker result: BFCL's checker verdict, or tau2's reward info (reward, breakdown, checks).",
    ),
    "assistant_tokens": (
        "TokenCounter",
        "Tokens the actor generated for this action (reasoning, tool calls, answer; no template or observation tokens).",
    ),
    "assistant_tokens_total": ("TokenCounter", "Sum of `assistant_tokens` over the episode so far."),
    "ttg_labels": (
        "TokenCounter, at episode end",
        "Recorded Token-to-Go of every decision step (paper eq. 1); None when the episode failed.",
    ),
    "ttg": (
        "ProgressMeterWrapper",
        "Meter's remaining-token estimate for the new state; None when it predicts failure or answered invalidly; 0 or None at the anchored final state.",
    ),
    "ttg_can_complete": (
        "ProgressMeterWrapper",
        "Meter's completion estimate for the new state (False for an invalid answer); the outcome at the final state.",
    ),
    "ttg_valid": (
        "ProgressMeterWrapper",
        "False when the meter's answer did not parse (it then counts as a failure prediction); True at the anchored final state.",
    ),
    "ttg_cost": (
        "ProgressMeterWrapper",
        "Cost c of the new state (paper eq. 7): the estimate, or C when failure is predicted; 0 on success and C on failure or truncation at the final state.",
    ),
    "ttg_delta": (
        "ProgressMeterWrapper, every step",
        "c_t - c_{t+1} (paper eq. 8): positive when the action reduced the estimated remaining work.",
    ),
    "ttg_carried": (
        "ProgressMeterWrapper with `carry_noops` (`--carry-noops`), every step",
        "True when the step left the env's `task_state_key()` unchanged (ALFWorld: `help`, `look`, `inventory`, `examine`, an invalid command), so the previous estimate was carried and `ttg_delta` is 0 without asking the meter.",
    ),
    "plan_length": (
        "PlanLength (meter-evaluation recordings of ALFWorld)",
        "Length of the exact plan from the new state (`expert_plan()`: the planner's, or an earlier state's plan that still reaches the goal; never the fast expert's; 0 once won; None when the planner ran out of its time limit); its change labels step quality.",
    ),
    "expert_ttg": (
        "PlanLength with the expert's response format (meter recordings of ALFWorld)",
        "Token-to-Go of the expert's roll-out from the new state: the tokens of the expert's responses along its plan (what TokenCounter records if the expert plays on); 0 once won; None when the plan does not fit in the turns left or the planner timed out. The meter's training target.",
    ),
    "planner_timeout": (
        "ttg/ALFWorld-v0, only when it happened",
        "True when the planner ran out of its time limit (`planner_timeout` seconds) since the previous step, in `expert_plan()` (PlanLength, planner-k; the scripted expert does not search): no earlier plan applied and `expert_plan()` returned [].",
    ),
}
