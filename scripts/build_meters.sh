#!/usr/bin/env bash
# Rebuild the progress meters that ship in ttg_envs/meters/shipped (what load_meter("ttg/<Env>-v0")
# loads) from scratch, and measure each on tasks it never saw. Every draw is seeded, so a rebuild
# gives the same meter and figures.
#
#   bash scripts/build_meters.sh [alfworld] [papersearchqa] [awm]    (default: all three)
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
# and random, whose random admissible commands include help, look, inventory and examine), plus
# no-op siblings (--noop-siblings 2: at every 3rd state, two commands that change nothing, tried in
# branches of the engine with their exact targets, ranked against the step taken). One torch thread
# (--threads 1), so the rebuilt meter is the same on any machine.
# ALFWORLD_TRAJECTORIES=DIR trains on trajectory files recorded before by the same command.
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
                   **{k: train["config"][k] for k in ("targets", "turn_limit", "mark_task_words") if k in train["config"]}},
    "heldout": {split: {**{k: v for k, v in report.items() if not isinstance(v, (list, dict))},
                        **({"noop": report["noop"]} if report.get("noop") else {})}
                for split, report in heldout["reports"].items()},
    "heldout_tasks": {"splits": heldout["config"]["splits"], "limit": heldout["config"]["limit"],
                      "tasks": heldout["config"]["tasks"], "policies": heldout["config"]["policies"]},
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
        source="--tasks $tasks"
    fi
    # shellcheck disable=SC2086
    $TTG train-meter --env ttg/ALFWorld-v0 --splits train $source \
        --policies expert noisy_expert:0.25 noisy_expert:0.5 noisy_expert:0.75 noisy_expert:1 \
        --targets expert --turn-limit 50 --mark-task-words --epochs 6 --val-fraction 0 \
        --noop-siblings 2 --threads 1 \
        --out "$WORK/alfworld/train"
    $TTG eval-meter --env ttg/ALFWorld-v0 --meter "$WORK/alfworld/train/meter" --splits valid_seen valid_unseen \
        --limit 24 --policies expert noisy_expert:0.25 noisy_expert:0.5 noisy_expert:0.75 --out "$WORK/alfworld/eval"
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

for name in "${@:-alfworld papersearchqa awm}"; do
    for one in $name; do
        "build_$one"
    done
done
