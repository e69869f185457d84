"""tau2's gold-path labels (``label_gold_path`` with replays) with the env's evaluator against tau2's own, in one run.

Records ``--tasks`` retail train tasks with ``perturbed:0.5`` (the gold user), then labels the same
trajectories twice per round, alternating: with the env's evaluator (``envs/tau2/evaluation.py``)
and with tau2's ``evaluate_simulation`` put back as ``Tau2Env``'s evaluation (what every replay's
end paid before). Prints the CPU seconds of each (process CPU time; imports and the recording
left out), their ratio, and whether both gave the same labels and targets.

    python benchmarks/bench_tau2_labels.py --tasks 6 --rounds 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def _tau2_evaluate(self):
    """``Tau2Env._evaluate`` as it was: tau2's evaluator, which builds both environments from the files."""
    from ttg_envs.envs.tau2.env import _quiet
    from ttg_envs.envs.tau2.evaluation import tau2_evaluation

    trajectory = [m.model_copy(update={"turn_idx": i}) for i, m in enumerate(self._episode.trajectory)]
    try:
        with _quiet():
            info = tau2_evaluation(self._task, trajectory, self.domain)
    except Exception as exc:
        return {"reward": 0.0, "error": f"tau2's evaluator raised {type(exc).__name__}: {exc}"}
    return info.model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6, help="retail train tasks (every 5th from 4)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    from ttg_envs.envs.tau2.env import Tau2Env
    from ttg_envs.training.meter.datasets import load_trajectories
    from ttg_envs.training.meter.evaluation import label_gold_path
    from ttg_envs.training.meter.record import collect_trajectories

    fast = Tau2Env._evaluate
    with tempfile.TemporaryDirectory() as tmp:
        paths = collect_trajectories(
            "ttg/Tau2-v0", {"user": "gold"}, "train", ["perturbed:0.5"], Path(tmp), tasks=[4 + 5 * i for i in range(args.tasks)]
        )
        label_gold_path(load_trajectories(paths)[:1], "ttg/Tau2-v0", {"user": "gold"}, progress=False)  # imports, warm caches
        seconds = {"env's evaluator": 0.0, "tau2's evaluator": 0.0}
        found = {}
        for _ in range(args.rounds):
            for name, evaluate in (("env's evaluator", fast), ("tau2's evaluator", _tau2_evaluate)):
                trajectories = load_trajectories(paths)
                Tau2Env._evaluate = evaluate
                try:
                    start = time.process_time()
                    label_gold_path(trajectories, "ttg/Tau2-v0", {"user": "gold"}, progress=False, targets=True)
                    seconds[name] += time.process_time() - start
                finally:
                    Tau2Env._evaluate = fast
                found[name] = [(t.step_labels, t.expert_ttg) for t in trajectories]
    n = len(found["env's evaluator"]) * args.rounds
    for name, total in seconds.items():
        print(f"{name}: {total:.1f} s CPU for {n} trajectories ({total / n:.2f} s each)")
    ours, theirs = seconds
    print(f"ratio {seconds[theirs] / seconds[ours]:.1f}x; same labels and targets: {found[ours] == found[theirs]}")


if __name__ == "__main__":
    main()
