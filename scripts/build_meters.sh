#!/usr/bin/env bash
# Rebuild the progress meters that ship in ttg_envs/meters/shipped (what load_meter("ttg/<Env>-v0")
# loads) from scratch, and measure each on tasks it never saw. Every draw is seeded, so a rebuild
# gives the same meter and figures.
#
#   bash scripts/build_meters.sh [alfworld] [papersearchqa] [awm] [bfcl] [tau2]    (default: all five)
#
# Each meter: an encoder meter (encoder:tiny, full history, <think> blocks dropped) trained on
# trajectories of scripted policies of different quality that TokenCounter recorded on the env's
# bundled train split; then `ttg eval-meter` on held-out tasks, whose figures go into the shipped
# meter.json under "heldout". Work files go to runs/build-meters.
#
# ALFWorld's meter learns from the expert's roll-out from every recorded state (--targets expert:
# the planner's plan, its responses counted by TokenCounter) and reads the turns left (--turn-limit
# 50) with the task's words marked in its action segments (--mark-task-words), on 180 train tasks
# outside the development panel (index % 3 == 0 and index % 10 != 5; the panel, index % 10 == 5, is
# where the settings were chosen), five policies each (expert, noisy expert at eps 0.25, 0.5, 0.75
# and random, whose random admissible commands include help, look, inventory and examine; the four
# that draw play each task twice, seeds 0 and 1: --episodes-per-task 2, 1,620 episodes), plus
# no-op siblings (--noop-siblings 2: at every 3rd state, two commands that change nothing, tried in
# branches of the engine with their exact targets, ranked against the step taken), and a logistic
# loss on the order of consecutive states' estimates (--step-rank-weight 1: the sign of each step's
# predicted change). One torch thread (--threads 1), so the rebuilt meter is the same on any machine.
# Its held-out figures are measured raw and with the estimate carried over declared no-ops (--carry-noops).
# ALFWORLD_TRAJECTORIES=DIR (BFCL_TRAJECTORIES, TAU2_TRAJECTORIES) trains on trajectory files
# recorded before by the same command.
#
# BFCL's and tau2's meters learn from gold replays and perturbed gold (perturbed:eps: dropped, extra
# and wrong-argument calls) with gold's remaining tokens from every state as targets (--targets
# gold: after a departure, gold's remaining moves replayed in branches of the engine), BFCL's on 708
# tasks with 96 tokens per segment, the task's words marked in them (--mark-task-words) and the head
# reading how many of the task's user requests are still to come (--requests-ahead: the env's task
# turns less the requests read), on one torch thread, tau2's through the
# pretrained all-MiniLM-L6-v2 (--backbone encoder:minilm, frozen: the segments are embedded once and
# the GRU and head train for 100 epochs in about a minute; the shipped meter refers to the package's
# weights instead of carrying them) with 96 tokens per segment, on one torch thread (--threads 1), on
# three episodes of each perturbed policy per task (--episodes-per-task 3: seeds 0-2; gold and
# gold_drop_last draw nothing and play once), and are measured against gold-path step labels
# (a step that makes gold's move is good; a departure is judged by replaying gold's remaining moves
# after it: good when they still win without the move it replaced, neutral when they win with it,
# bad otherwise); the AWM meter these envs used before is measured on the same held-out
# trajectories, into meter.json's "heldout_previous".
set -euo pipefail
cd "$(dirname "$0")/.."
TTG=${TTG:-.venv/bin/ttg}
PY=${PYTHON:-.venv/bin/python}
WORK=${WORK:-runs/build-meters}

ship() {  # ship NAME ENV_ID: copy the trained meter into the package with its held-out figures
    "$PY" - "$WORK/$1" "ttg_envs/meters/shipped/$1" "$2" <<'PYEOF'
import json, shutil, sys
from pathlib import Path
work, dest, env_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
shutil.rmtree(dest, ignore_errors=True)
shutil.copytree(work / "train" / "meter", dest)
config = json.loads((dest / "meter.json").read_text())
train = json.loads((work / "train" / "train_report.json").read_text())
heldout = json.loads((work / "eval" / "eval_report.json").read_text())
config["train_report"]["trajectories"]["files"] = [Path(f).name for f in config["train_report"]["trajectories"]["files"]]
config["ready"] = {
    "env_id": env_id,
    "recipe": "bash scripts/build_meters.sh " + dest.name,
    "trained_on": {"split": train["config"].get("split") or train["config"]["splits"][0],
                   "tasks": train["config"].get("tasks") or train["config"].get("limit"),
                   "trajectories": train["trajectories"]["train"],
                   "policies": train["config"]["policies"], "epochs": train["config"]["epochs"],
                   **{k: train["config"][k] for k in ("backbone", "segment_tokens", "targets", "turn_limit", "mark_task_words", "task_from_user", "compact_calls", "requests_ahead") if k in train["config"]}},
    "heldout": {split: {**{k: v for k, v in report.items() if not isinstance(v, (list, dict))},
                        **({"noop": report["noop"]} if report.get("noop") else {})}
                for split, report in heldout["reports"].items()},
    "heldout_tasks": {"splits": heldout["config"]["splits"], "limit": heldout["config"]["limit"],
                      "tasks": heldout["config"]["tasks"], "policies": heldout["config"]["policies"]},
}
previous = work / "eval-previous" / "eval_report.json"
if previous.is_file():  # the meter the env loaded before, on the same held-out trajectories
    before = json.loads(previous.read_text())
    reports = before["reports"]
    # Read back from files, trajectories are grouped by their task's split (BFCL: its category group):
    # the good and bad steps of all groups pooled are what the held-out row compares with.
    pooled = {}
    for kind in ("good", "bad"):
        n = sum(r["steps"].get(kind, 0) for r in reports.values())
        hits = sum(r["steps"].get(kind, 0) * (r[f"{kind}_step_accuracy"] or 0) for r in reports.values())
        pooled[f"{kind}_step_accuracy"] = hits / n if n else None
    if None not in pooled.values():
        pooled["balanced_step_accuracy"] = (pooled["good_step_accuracy"] + pooled["bad_step_accuracy"]) / 2
    config["ready"]["heldout_previous"] = {
        "meter": before["meter"],
        "pooled": pooled,
        **{split: {k: v for k, v in report.items() if not isinstance(v, (list, dict))} for split, report in reports.items()},
    }
(dest / "meter.json").write_text(json.dumps(config, indent=1))
size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
print(f"shipped {dest} ({size / 1e6:.1f} MB)")
PYEOF
}

build_alfworld() {
    local tasks source
    tasks=$(seq 0 599 | awk '$1 % 10 != 5 && $1 % 3 == 0' | tr '\n' ' ')
    if [ -n "${ALFWORLD_TRAJECTORIES:-}" ]; then
        source="--trajectories $(ls "$ALFWORLD_TRAJECTORIES"/*.jsonl | tr '\n' ' ')"
    else
        source="--tasks $tasks --episodes-per-task 2"
    fi
    # shellcheck disable=SC2086
    $TTG train-meter --env ttg/ALFWorld-v0 --splits train $source \
        --policies expert noisy_expert:0.25 noisy_expert:0.5 noisy_expert:0.75 noisy_expert:1 \
        --targets expert --turn-limit 50 --mark-task-words --epochs 6 --val-fraction 0 \
        --noop-siblings 2 --step-rank-weight 1 --threads 1 \
        --out "$WORK/alfworld/train"
    $TTG eval-meter --env ttg/ALFWorld-v0 --meter "$WORK/alfworld/train/meter" --splits valid_seen valid_unseen \
        --limit 24 --policies expert noisy_expert:0.25 noisy_expert:0.5 noisy_expert:0.75 --carry-noops --out "$WORK/alfworld/eval"
    ship alfworld ttg/ALFWorld-v0
}

build_papersearchqa() {
    $TTG train-meter --env ttg/PaperSearchQA-v0 --splits train --limit 120 --epochs 10 --out "$WORK/papersearchqa/train"
    $TTG eval-meter --env ttg/PaperSearchQA-v0 --meter "$WORK/papersearchqa/train/meter" --splits test --limit 60 \
        --out "$WORK/papersearchqa/eval"
    ship papersearchqa ttg/PaperSearchQA-v0
}

build_awm() {
    # AWM has 42 bundled tasks in one split: every fifth task is held out.
    local train_tasks eval_tasks
    train_tasks=$(seq 0 41 | awk '$1 % 5 != 4' | tr '\n' ' ')
    eval_tasks=$(seq 0 41 | awk '$1 % 5 == 4' | tr '\n' ' ')
    # shellcheck disable=SC2086
    $TTG train-meter --env ttg/AWM-v0 --splits train --tasks $train_tasks --epochs 10 --out "$WORK/awm/train"
    # shellcheck disable=SC2086
    $TTG eval-meter --env ttg/AWM-v0 --meter "$WORK/awm/train/meter" --splits train --tasks $eval_tasks \
        --out "$WORK/awm/eval"
    ship awm ttg/AWM-v0
}

# heldout_previous NAME ENV_ID KWARGS: the AWM meter (what BFCL and tau2 loaded before) on NAME's held-out trajectories
heldout_previous() {
    $TTG eval-meter --env "$2" --env-kwargs "$3" --meter ttg/AWM-v0 --trajectories "$WORK/$1"/eval/trajectories/*.jsonl \
        --out "$WORK/$1/eval-previous"
}

build_bfcl() {
    # BFCL has no train split: tasks of the "all" split by index. Training: index % 25 in {0, 3, 18,
    # 21} (708 tasks, 3,540 episodes); the development panel where the settings were chosen: index %
    # 25 == 12; held out: index % 25 == 6.
    local train_tasks eval_tasks
    train_tasks=$(seq 0 4424 | awk '$1 % 25 == 0 || $1 % 25 == 3 || $1 % 25 == 18 || $1 % 25 == 21' | tr '\n' ' ')
    eval_tasks=$(seq 0 4424 | awk '$1 % 25 == 6' | tr '\n' ' ')
    local source="--tasks $train_tasks"
    [ -n "${BFCL_TRAJECTORIES:-}" ] && source="--trajectories $(ls "$BFCL_TRAJECTORIES"/*.jsonl | tr '\n' ' ')"
    # shellcheck disable=SC2086
    $TTG train-meter --env ttg/BFCL-v0 --splits all $source \
        --policies gold gold_drop_last perturbed:0.3 perturbed:0.5 perturbed:0.75 --epochs 10 --targets gold --segment-tokens 96 \
        --mark-task-words --requests-ahead --threads 1 --out "$WORK/bfcl/train"
    # shellcheck disable=SC2086
    $TTG eval-meter --env ttg/BFCL-v0 --meter "$WORK/bfcl/train/meter" --splits all --tasks $eval_tasks \
        --policies gold gold_drop_last perturbed:0.3 perturbed:0.5 --out "$WORK/bfcl/eval"
    heldout_previous bfcl ttg/BFCL-v0 '{}'
    ship bfcl ttg/BFCL-v0
}

build_tau2() {
    # tau2 retail with the scripted gold user. Training: train-split tasks with index % 5 != 4; the
    # development panel: index % 5 == 4 of the train split; held out: the whole test split (40 tasks).
    local train_tasks
    train_tasks=$(seq 0 73 | awk '$1 % 5 != 4' | tr '\n' ' ')
    local source="--tasks $train_tasks --episodes-per-task 3"
    [ -n "${TAU2_TRAJECTORIES:-}" ] && source="--trajectories $(ls "$TAU2_TRAJECTORIES"/*.jsonl | tr '\n' ' ')"
    # shellcheck disable=SC2086
    $TTG train-meter --env ttg/Tau2-v0 --env-kwargs '{"user": "gold"}' --splits train $source \
        --policies gold gold_drop_last perturbed:0.15 perturbed:0.3 perturbed:0.5 perturbed:0.75 \
        --backbone encoder:minilm --segment-tokens 96 --epochs 100 \
        --targets gold --threads 1 --task-from-user --out "$WORK/tau2/train"
    $TTG eval-meter --env ttg/Tau2-v0 --env-kwargs '{"user": "gold"}' --meter "$WORK/tau2/train/meter" --splits test \
        --policies gold gold_drop_last perturbed:0.3 perturbed:0.5 --out "$WORK/tau2/eval"
    heldout_previous tau2 ttg/Tau2-v0 '{"user": "gold"}'
    ship tau2 ttg/Tau2-v0
}

for name in "${@:-alfworld papersearchqa awm bfcl tau2}"; do
    for one in $name; do
        "build_$one"
    done
done
