"""Host side: one cgroup per sandbox, bounding its totals (CPU, memory, processes), where the host can make one.

Per-process rlimits (:mod:`.inside_guard`) do not add up: children under a 1 GiB address-space limit
together hold more, and an app's background thread goes on burning a core after its call returned.
A cgroup bounds the sandbox as a whole: :data:`CPUS` cores of CPU time (when set), :data:`MEMORY_BYTES` of
memory (``/tmp`` included; past it the OOM killer stops a process of that sandbox only), :data:`PIDS`
tasks; and between calls it is frozen (:data:`FREEZE`), so nothing of the sandbox runs while no call does.

It needs a writable cgroup hierarchy with the ``memory`` and ``pids`` controllers (and ``cpu``;
``freezer`` and ``cpuacct`` where mounted): cgroup v1 (one hierarchy per controller) or v2 (one, the
controllers enabled for the host's own cgroup's children). Typically a root host outside a container,
or a container given its cgroup; elsewhere :meth:`SandboxCgroup.create` returns None (warning once)
and the sandbox has its rlimits and its process count alone. The fork server joins the cgroup before
bwrap starts (a shell writes its own pid, then ``exec``\\ s), so no process of the sandbox is ever outside.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import threading
import time
import warnings
import weakref
from pathlib import Path

#: CPU cores a sandbox may use at once (its quota per period); None: no CPU quota. It was off after one
#: run where a sandbox scheduled as a group of its own made AWM's steps slower on a loaded host;
#: interleaved runs of `benchmarks/bench_awm_cpu.py` found no steady cost (see the README).
CPUS: float | None = 1.0
#: Memory of all a sandbox's processes together, page cache and ``/tmp`` included (bytes).
MEMORY_BYTES = 2 << 30
#: Tasks (processes and threads) in a sandbox.
PIDS = 256
#: Freeze a sandbox's cgroup between calls (:class:`~.host_process.Zygote` thaws it for each), so a
#: thread an app left running uses no CPU once its call returned.
FREEZE = True
#: Seconds after the last call returned before the sandbox is frozen (back-to-back calls pay nothing).
FREEZE_AFTER = 0.1
_PERIOD_US = 100_000
_CONTROLLERS = ("cpu", "memory", "pids")
#: v1 controllers used where mounted: freezing, and the CPU time used (:meth:`SandboxCgroup.usage_us`).
_OPTIONAL = ("freezer", "cpuacct")
_warned = False


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
                    if option in _CONTROLLERS or option in _OPTIONAL:
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


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _clear(folders: list[Path], timeout: float = 2.0) -> bool:
    """Thaw the cgroup ``folders`` (one cgroup's, in each hierarchy), kill what is in them, remove them; False if one stays."""
    for folder in folders:
        for switch, thawed in (("cgroup.freeze", "0"), ("freezer.state", "THAWED")):
            if (folder / switch).exists():
                _write(folder / switch, thawed)
    for folder in folders:
        if (folder / "cgroup.kill").exists() and _write(folder / "cgroup.kill", "1"):
            continue
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    left = list(folders)
    while left:
        for folder in list(left):
            try:
                folder.rmdir()
                left.remove(folder)
            except FileNotFoundError:
                left.remove(folder)
            except OSError:  # killed processes take a moment to exit
                pass
        if left:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
    return True


def _remove_abandoned(parents: list[Path]) -> None:
    """Remove the sandbox cgroups under ``parents`` whose uid no live host leases (a dead host's).

    A host that died while its sandbox was frozen left it frozen, its processes in it (not even
    ``SIGKILL`` ends a frozen process on v1): it is thawed and its processes killed first.
    """
    from .host_bwrap import UidLease

    abandoned: dict[str, list[Path]] = {}
    for parent in parents:
        try:
            names = [n for n in parent.iterdir() if n.name.startswith("ttg-awm-") and n.name[8:].isdigit()]
        except OSError:
            continue
        for folder in names:
            abandoned.setdefault(folder.name, []).append(folder)
    for name, folders in abandoned.items():
        if UidLease.free(int(name[8:])):
            _clear(folders, timeout=0.5)


def _folder(mount: tuple[str, str], path: str) -> Path:
    point, root = mount
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(point) / relative.lstrip("/")


def warn_unavailable(why: str) -> None:
    """Warn, once per process, that sandboxes get no cgroup (``why``) and what that loses."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            f"AWM sandboxes get no cgroup here ({why}): their CPU, memory and task totals are not enforced "
            "and they are not frozen between calls; only the per-process rlimits and the process count hold.",
            RuntimeWarning,
            stacklevel=3,
        )


_FROZEN: weakref.WeakSet[SandboxCgroup] = weakref.WeakSet()


_exiting = False


@atexit.register
def _thaw_all() -> None:
    """At exit, thaw this process's frozen cgroups for good (a frozen process cannot die with its host)."""
    global _exiting
    _exiting = True
    for cgroup in list(_FROZEN):
        cgroup.thaw()


class SandboxCgroup:
    """The cgroup folders (one per v1 controller, or one v2) of one sandbox, with its totals written.

    ``switch`` is its freeze switch (``cgroup.freeze`` on v2, ``freezer.state`` on v1) with the values
    that freeze and thaw it, ``accounting`` the folder holding its CPU time; None where not mounted.
    Only the process that made it freezes it (one forked from that host leaves it alone).
    """

    def __init__(self, folders: list[Path], switch: tuple[Path, str, str] | None = None, accounting: Path | None = None) -> None:
        self.folders, self.switch, self.accounting = folders, switch, accounting
        self.owner = os.getpid()
        self.frozen = False
        self._lock = threading.Lock()

    @classmethod
    def create(cls, name: str) -> SandboxCgroup | None:
        """A new cgroup ``name`` with the totals :data:`CPUS`, :data:`MEMORY_BYTES`, :data:`PIDS`; None where none can be made.

        The first None of a process warns (a :class:`RuntimeWarning` naming what is not enforced).
        """
        cgroup, why = cls._create(name)
        if cgroup is None:
            warn_unavailable(why)
        return cgroup

    @classmethod
    def _create(cls, name: str) -> tuple[SandboxCgroup | None, str]:
        cpus, memory, pids = CPUS, MEMORY_BYTES, PIDS
        controllers = [c for c in _CONTROLLERS if c != "cpu" or cpus is not None]
        freezer = accounting = None
        v2 = False
        try:
            mounts, own = _mounts(), _own_paths()
            quota = max(1000, int((cpus or 1) * _PERIOD_US))
            if all(c in mounts and c in own for c in controllers):
                plan = {
                    "cpu": {"cpu.cfs_period_us": _PERIOD_US, "cpu.cfs_quota_us": quota},
                    "memory": {"memory.limit_in_bytes": memory},
                    "pids": {"pids.max": pids},
                    "freezer": {},
                    "cpuacct": {},
                }
                used = controllers + [c for c in _OPTIONAL if c in mounts and c in own]
                if cpus is None and "cpu" in mounts and mounts.get("cpuacct") == mounts["cpu"]:
                    used = [c for c in used if c != "cpuacct"]  # co-mounted with cpu: it would schedule the sandbox as a group of its own
                merged: dict[Path, dict] = {}  # co-mounted controllers (cpu,cpuacct) share one folder
                for c in used:
                    merged.setdefault(_folder(mounts[c], own[c]) / name, {}).update(plan[c])
                writes = list(merged.items())
                swept = list(dict.fromkeys(_folder(mounts[c], own[c]) for c in (*_CONTROLLERS, *_OPTIONAL) if c in mounts and c in own))
                if "freezer" in used:
                    freezer = _folder(mounts["freezer"], own["freezer"]) / name
                if "cpuacct" in used:
                    accounting = _folder(mounts["cpuacct"], own["cpuacct"]) / name
            elif "unified" in mounts and "unified" in own:
                parent = _folder(mounts["unified"], own["unified"])
                enabled = set((parent / "cgroup.subtree_control").read_text().split())
                if not set(controllers) <= enabled:
                    return None, f"the controllers {', '.join(sorted(set(controllers) - enabled))} are not enabled in {parent}"
                settings = {"memory.max": memory, "pids.max": pids, **({"cpu.max": f"{quota} {_PERIOD_US}"} if cpus is not None else {})}
                writes, swept = [(parent / name, settings)], [parent]
                freezer = accounting = parent / name
                v2 = True
            else:
                missing = [c for c in controllers if c not in mounts or c not in own]
                return None, f"no cgroup v2 and no v1 hierarchy of {', '.join(missing)} mounted"
        except (OSError, ValueError) as exc:
            return None, f"the cgroup hierarchy is unreadable: {exc}"
        made: list[Path] = []
        _remove_abandoned(swept)
        try:
            # A folder of this name is a dead host's, named by a uid this host now holds: cleared first.
            if not _clear([folder for folder, _ in writes if folder.exists()], timeout=0.5):
                raise OSError(f"a dead host's cgroup {name} could not be removed")
            for folder, settings in writes:
                folder.mkdir()
                made.append(folder)
                for key, value in settings.items():
                    (folder / key).write_text(str(value))
        except OSError as exc:
            cls(made).close()
            return None, f"it cannot be written: {exc}"
        switch = None
        if freezer is not None and v2 and (freezer / "cgroup.freeze").exists():  # v2 from Linux 5.2 on
            switch = (freezer / "cgroup.freeze", "1", "0")
        elif freezer is not None and not v2:
            switch = (freezer / "freezer.state", "FROZEN", "THAWED")
        return cls(made, switch, accounting), ""

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup (so every child is inside)."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))}" for f in self.folders)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh", *argv]

    @property
    def owned(self) -> bool:
        """Whether this process made the cgroup (only it freezes it)."""
        return os.getpid() == self.owner

    def freeze(self) -> bool:
        """Stop every process of the sandbox where it is (:meth:`thaw` resumes them); False where it cannot."""
        if self.switch is None or not self.owned:
            return False
        with self._lock:
            self.frozen = True  # before the write: a thaw after a half-done freeze still writes
            _FROZEN.add(self)
            if not _exiting and _write(self.switch[0], self.switch[1]):
                return True
            self.frozen = False
            _FROZEN.discard(self)
            return False

    def thaw(self) -> None:
        """Let the sandbox's processes run again (a no-op unless :meth:`freeze` froze it)."""
        if not self.frozen:
            return
        with self._lock:
            if self.frozen:
                _write(self.switch[0], self.switch[2])
                self.frozen = False
                _FROZEN.discard(self)

    def usage_us(self) -> int | None:
        """CPU time all the sandbox's processes used so far (microseconds); None without CPU accounting."""
        if self.accounting is None:
            return None
        try:
            if (self.accounting / "cpuacct.usage").exists():
                return int((self.accounting / "cpuacct.usage").read_text()) // 1000
            for line in (self.accounting / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value)
        except (OSError, ValueError):
            return None
        return None

    def close(self) -> None:
        """Remove the cgroup once its processes are gone (thawed first; killed ones may take a moment to exit)."""
        self.thaw()
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
