"""Adversarial 1 MB actions: ``env.step`` of every env, and each parser on the same text without
the length limit, against the old lazy-regex parsers measured in the same run on 8 KB.

Each env gets a 1 MB action built to make its parser backtrack (repeated unclosed tags, a code
fence opener followed by spaces). ``env.step`` rejects it by length (``TextEnv.max_action_chars``);
the last column steps the same text cut to that limit, which is parsed; the parser columns show the
parsers are linear even without the bound; a short plain reply from the same state is the baseline
(for tau2 a plain reply ends the episode, so both include tau2's own evaluation, ~1-2 s here).
Target: under 1 s each, beyond that baseline.

The bounded-state cases (issue 29; ``--bounds`` runs only them) each run in a fresh process with
its wall time and peak RSS: folders copied into each other (exponential state), a grep over an
amplified file (observation size), huge literals in official prompting scoring, and a flood of
calls, and (tau2) a database grown by long names, step after step. Before the bounds three of them were still running at 60 s and the grep returned a
62.9-million-character observation; the README's Benchmarks section has one run's numbers.

Run: ``python benchmarks/bench_adversarial.py [--bounds]``.
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


# ----------------------------------------------------------------- bounded state and numbers (issue 29)
#: Each case runs in its own process (time and peak RSS of that process), stopped at CASE_TIMEOUT s.
CASE_TIMEOUT = 60
CASE_MEMORY = 6 << 30


def _bfcl(task_index: int, **kwargs):
    env = gym.make("ttg/BFCL-v0", categories="multi_turn_base", **kwargs)
    env.reset(options={"task_index": task_index})
    return env


def _call(name: str, **arguments) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def case_exponential_copy() -> dict:
    """A folder and its copy copied into each other, one pair of cp calls per step (state_key each step)."""
    env = _bfcl(0, scoring="lenient")
    fs = env.unwrapped._episode.model.instances["GorillaFileSystem"]
    folder = next(n for n, item in fs._current_dir.contents.items() if type(item).__name__ == "Directory")
    invalid = steps = 0
    for i in range(30):
        _, _, terminated, truncated, info = env.step(
            _call("cp", source=folder, destination=f"c{i}") + _call("cp", source=f"c{i}", destination=folder)
        )
        steps, invalid = steps + 1, invalid + (not info["action_valid"])
        if terminated or truncated:  # BFCL's 20 steps per turn
            break
    return {"steps": steps, "invalid_steps": invalid}


def case_amplification() -> dict:
    """One official-prompting step: a file of 1,048,576 newlines, then grep for '' 15 times."""
    env = _bfcl(0, model_style="prompting")
    greps = ", ".join(["grep(file_name='amp.txt', pattern='')"] * 15)
    obs = env.step(f"[touch(file_name='amp.txt'), echo(content='\\n' * 1048576, file_name='amp.txt'), {greps}]")[0]
    return {"observation_chars": len(obs)}


def case_huge_literal() -> dict:
    """Official prompting: a 713-character integer product and a 38-character nested list."""
    env = _bfcl(0, model_style="prompting")
    big = "((1<<1048576)-1)"
    out = {}
    for name, action in (("product", f"[ls(a={'*'.join([big] * 42)})]"), ("nested_list", "[get_watchlist(x=[[[1]*100]*100]*100)]")):
        info = env.step(action)[4]
        out[name] = "valid" if info["action_valid"] else "invalid"
    return out


def case_flood() -> dict:
    """Official prompting: as many send_message calls as one action holds (~5,000), step after step
    (MessageAPI draws ids from 90,000 with a retry loop that never ends once they are used up)."""
    env = _bfcl(14, model_style="prompting")
    messages = env.unwrapped._episode.model.instances["MessageAPI"]
    sender, receiver = list(messages.user_map.values())[:2]
    env.step(f"[message_login(user_id='{sender}')]")
    call = f"send_message(receiver_id='{receiver}',message='')"
    action = "[" + ",".join([call] * (MAX_ACTION_CHARS // (len(call) + 1) - 1)) + "]"
    for step in range(40):
        obs, _, terminated, truncated, info = env.step(action)
        if not info["action_valid"] or terminated or truncated:
            break
    return {"steps": step + 1, "messages": len(messages.generated_ids), "stopped_by": obs[:90]}


def case_tau2_growth() -> dict:
    """tau2 airline: each step gives one more passenger a 200,000-character name (every action within
    its bounds), 40 steps (the database's changed records stop at STATE_BOUNDS; before, all were booked)."""
    import json

    from ttg_envs.envs.tau2.state import reading

    env = gym.make("ttg/Tau2-v0", domain="airline", user="gold", max_errors=100)
    env.reset(options={"task_index": 0})
    with reading():
        reservations = [r for r in env.unwrapped.environment.tools.db.reservations.values() if r.passengers][:40]
    invalid = 0
    for reservation in reservations:
        passengers = [p.model_dump() for p in reservation.passengers]
        passengers[0]["first_name"] = "y" * 200_000
        call = {
            "name": "update_reservation_passengers",
            "arguments": {"reservation_id": reservation.reservation_id, "passengers": passengers},
        }
        obs, _, _, _, info = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
        invalid += not info["action_valid"]
    return {"steps": len(reservations), "invalid_steps": invalid, "last": obs[:90]}


CASES = {
    "exponential_copy": case_exponential_copy,
    "amplification": case_amplification,
    "huge_literal": case_huge_literal,
    "flood": case_flood,
    "tau2_growth": case_tau2_growth,
}


def run_case(name: str) -> None:
    """Child side: run one case and print its result and time as JSON."""
    import json
    import resource

    start = time.perf_counter()
    result = CASES[name]()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": round(time.perf_counter() - start, 3), "peak_mb": round(peak), **result}))


def _peak_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return float("nan")


def bounded_cases() -> None:
    """Parent side: each case in a fresh process, with its wall time, peak RSS and result."""
    import json
    import resource
    import subprocess
    import sys

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (CASE_MEMORY, CASE_MEMORY))

    print(f"\n{'case':<18}{'wall s':>9}{'peak RSS MB':>13}  result")
    for name in CASES:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, __file__, "--case", name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=limits, text=True
        )
        rss = 0.0
        try:
            out, _ = child.communicate(timeout=CASE_TIMEOUT)
            result = out.strip().splitlines()[-1] if out.strip() else f"died (exit {child.returncode})"
        except subprocess.TimeoutExpired:
            rss = _peak_mb(child.pid)  # the high-water mark so far, read before the kill
            child.kill()
            child.communicate()
            result = f"still running at {CASE_TIMEOUT} s (killed)"
        wall = time.perf_counter() - start
        try:
            fields = json.loads(result)
            rss = fields.pop("peak_mb")
            fields.pop("seconds")
            result = json.dumps(fields)
        except ValueError:
            pass
        print(f"{name:<18}{wall:>9.2f}{rss:>13.0f}  {result}")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--case"]:
        run_case(sys.argv[2])
    elif sys.argv[1:2] == ["--bounds"]:
        bounded_cases()
    else:
        main()
        bounded_cases()
