"""Host side: one cgroup per sandbox, bounding its totals (CPU, memory, processes), where the host can make one.

Per-process rlimits (:mod:`.inside_guard`) do not add up: children under a 1 GiB address-space limit
together hold more, and an app's background thread goes on burning a core after its call returned.
A cgroup bounds the sandbox as a whole: :data:`CPUS` cores of CPU time (when set), :data:`MEMORY_BYTES` of
memory (its ``/tmp`` tmpfs pages included; past it the kernel's OOM killer stops a process of that
sandbox only) and :data:`PIDS` tasks (processes and threads).

It needs a writable cgroup hierarchy with the ``memory`` and ``pids`` controllers (and ``cpu``): cgroup v1
(one hierarchy per controller) or v2 (one, the controllers enabled for the host's own cgroup's
children). Typically that is a root host outside a container, or a container given its cgroup;
elsewhere :meth:`SandboxCgroup.create` returns None and the sandbox runs with its rlimits and its
process count (leased uid or user namespace) alone. The fork server joins the cgroup before bwrap
starts (a shell writes its own pid, then ``exec``\\ s), so no process of the sandbox is ever outside.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

#: CPU cores a sandbox may use at once (its quota per period); None: no CPU cgroup. Off by default:
#: a sandbox scheduled as a group of its own made AWM's steps and branches slower on a loaded host
#: (`benchmarks/bench_lookahead.py`; see the README), so it is for hosts that run untrusted apps.
CPUS: float | None = None
#: Memory of all a sandbox's processes together, page cache and ``/tmp`` included (bytes).
MEMORY_BYTES = 2 << 30
#: Tasks (processes and threads) in a sandbox.
PIDS = 256
_PERIOD_US = 100_000
_CONTROLLERS = ("cpu", "memory", "pids")


def _mounts() -> dict[str, tuple[str, str]]:
    """Controller (``"unified"`` for v2) -> (mount point, root of the mount in its hierarchy)."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, (fstype, _source, options) = left.split(), right.split()[:3]
            if fstype == "cgroup2":
                found.setdefault("unified", (fields[4], fields[3]))
            elif fstype == "cgroup":
                for option in options.split(","):
                    if option in _CONTROLLERS:
                        found.setdefault(option, (fields[4], fields[3]))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (``"unified"`` for v2) -> this process's cgroup path in that hierarchy."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else ["unified"]:
                paths[controller] = path
    return paths


def _remove_abandoned(parent: Path) -> None:
    """Remove the sandbox cgroups under ``parent`` whose uid no live host leases (a dead host's, empty)."""
    from .host_bwrap import UidLease

    try:
        names = [n for n in parent.iterdir() if n.name.startswith("ttg-awm-") and n.name[8:].isdigit()]
    except OSError:
        return
    for folder in names:
        if UidLease.free(int(folder.name[8:])):
            try:
                folder.rmdir()
            except OSError:  # processes still in it: not abandoned after all
                pass


def _folder(mount: tuple[str, str], path: str) -> Path:
    point, root = mount
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(point) / relative.lstrip("/")


class SandboxCgroup:
    """The cgroup folders (one per v1 controller, or one v2) of one sandbox, with its totals written."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders

    @classmethod
    def create(cls, name: str) -> SandboxCgroup | None:
        """A new cgroup ``name`` with the totals :data:`CPUS`, :data:`MEMORY_BYTES`, :data:`PIDS`; None where none can be made."""
        cpus, memory, pids = CPUS, MEMORY_BYTES, PIDS
        controllers = [c for c in _CONTROLLERS if c != "cpu" or cpus is not None]
        try:
            mounts, own = _mounts(), _own_paths()
            quota = max(1000, int((cpus or 1) * _PERIOD_US))
            if all(c in mounts and c in own for c in controllers):
                plan = {
                    "cpu": {"cpu.cfs_period_us": _PERIOD_US, "cpu.cfs_quota_us": quota},
                    "memory": {"memory.limit_in_bytes": memory},
                    "pids": {"pids.max": pids},
                }
                writes = [(_folder(mounts[c], own[c]) / name, plan[c]) for c in controllers]
                swept = [_folder(mounts[c], own[c]) for c in _CONTROLLERS if c in mounts and c in own]
            elif "unified" in mounts and "unified" in own:
                parent = _folder(mounts["unified"], own["unified"])
                if not set(controllers) <= set((parent / "cgroup.subtree_control").read_text().split()):
                    return None
                settings = {"memory.max": memory, "pids.max": pids, **({"cpu.max": f"{quota} {_PERIOD_US}"} if cpus is not None else {})}
                writes, swept = [(parent / name, settings)], [parent]
            else:
                return None
        except (OSError, ValueError):
            return None
        made: list[Path] = []
        for parent in swept:
            _remove_abandoned(parent)
        try:
            for folder, settings in writes:
                if folder.exists():
                    folder.rmdir()  # a dead host's, named by a uid this host now holds: empty, or rmdir fails
                folder.mkdir()
                made.append(folder)
                for key, value in settings.items():
                    (folder / key).write_text(str(value))
        except OSError:
            cls(made).close()
            return None
        return cls(made)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup (so every child is inside)."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))}" for f in self.folders)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]

    def close(self) -> None:
        """Remove the cgroup once its processes are gone (killed ones may take a moment to exit)."""
        deadline = time.monotonic() + 2
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy: left for the next sandbox of this uid, which removes it first
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
