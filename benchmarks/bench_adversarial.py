"""Adversarial 1 MB actions: ``env.step`` of every env, and each parser on the same text without
the length limit, against the old lazy-regex parsers measured in the same run on 8 KB.

Each env gets a 1 MB action built to make its parser backtrack (repeated unclosed tags, a code
fence opener followed by spaces). ``env.step`` rejects it by length (``TextEnv.max_action_chars``);
the last column steps the same text cut to that limit, which is parsed; the parser columns show the
parsers are linear even without the bound; a short plain reply from the same state is the baseline
(for tau2 a plain reply ends the episode, so both include tau2's own evaluation, ~1-2 s here).
Target: under 1 s each, beyond that baseline.

Run: ``python benchmarks/bench_adversarial.py``.
"""

from __future__ import annotations

import re
import time

import gymnasium as gym

import ttg_envs  # noqa: F401
from ttg_envs.core import MAX_ACTION_CHARS, parse_react
from ttg_envs.envs.papersearchqa.env import parse_search_action
from ttg_envs.tools.parsing import parse_tool_calls

MB = 1 << 20
ACTIONS = {
    "react": "<action>" * (MB // 8),
    "search": "<search><answer>" * (MB // 16),
    "tool_calls": "<tool_call>" * (MB // 11),
    "fence": "```" + " " * (MB - 4) + "x",
}
OLD = {
    "react": lambda t: re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE).findall(t),
    "search": lambda t: re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE).search(t),
    "tool_calls": lambda t: list(re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL).finditer(t)),
    "fence": lambda t: re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL).match(t),
}
NEW = {"react": parse_react, "search": parse_search_action, "tool_calls": parse_tool_calls, "fence": parse_tool_calls}


def seconds(fn, text: str) -> float:
    start = time.perf_counter()
    fn(text)
    return time.perf_counter() - start


def envs():
    """(name, env factory, action kinds it parses)."""
    from pathlib import Path

    tiny = Path(__file__).resolve().parents[1] / "tests" / "data" / "tiny_game"
    yield "ALFWorld", lambda: gym.make("ttg/ALFWorld-v0", game_files=str(tiny)), ["react"]
    yield "PaperSearchQA", lambda: gym.make("ttg/PaperSearchQA-v0", split="test"), ["search"]
    yield "AWM", lambda: gym.make("ttg/AWM-v0", scenarios=["crm_1"]), ["tool_calls", "fence"]
    yield "BFCL", lambda: gym.make("ttg/BFCL-v0", categories="multi_turn_base"), ["tool_calls", "fence"]
    yield "tau2", lambda: gym.make("ttg/Tau2-v0", domain="airline", user="gold"), ["tool_calls", "fence"]


def main() -> None:
    small = 8 << 10
    print(f"{'parser':<12}{'old regex 8 KB':>18}{'new 8 KB':>12}{'new 1 MB':>12}")
    for kind, text in ACTIONS.items():
        head = text[:small]
        old, new_small, new_large = seconds(OLD[kind], head), seconds(NEW[kind], head), seconds(NEW[kind], text)
        print(f"{kind:<12}{old:>17.3f}s{new_small:>11.4f}s{new_large:>11.4f}s")
    print(f"\n{'env':<15}{'action':<12}{'env.step 1 MB':>15}{'at the limit':>15}{'short text':>12}{'ratio':>8}")
    for name, make, kinds in envs():
        try:
            env = make()
        except Exception as exc:  # an optional extra not installed
            print(f"{name:<15}skipped ({type(exc).__name__}: {exc})")
            continue
        for kind in kinds:
            env.reset(seed=0)
            took = seconds(env.step, ACTIONS[kind])
            env.reset(seed=0)  # the same text cut to the length limit goes through the parser
            parsed = seconds(env.step, ACTIONS[kind][:MAX_ACTION_CHARS])
            env.reset(seed=0)  # baseline: what the env does with a short plain reply from the same state
            short = seconds(env.step, "ok")
            over = "" if max(took, parsed - short) < 1 else "  OVER 1 s"
            ratio = parsed / max(short, 1e-4)
            print(f"{name:<15}{kind:<12}{took:>14.3f}s{parsed:>14.3f}s{short:>11.3f}s{ratio:>7.1f}x{over}")
        env.close()


if __name__ == "__main__":
    main()
