"""Host side: how the AWM fork server is started: inside a bubblewrap sandbox (default) or as a plain process.

``sandbox="bwrap"`` (the default) starts the fork server (:mod:`.inside_forkserver`) and so every app and
verifier it forks under `bubblewrap <https://github.com/containers/bubblewrap>`_ (what the sandbox
holds: :func:`bwrap_command`). Hard resource limits (soft = hard) are set in each child before
model-written code runs (:mod:`.inside_guard`). ``sandbox="python"`` keeps only the in-process audit
hook: it confines code that misbehaves by accident, not code that means harm, and warns.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

#: The uid and gid model-written code sees when the host is not root (``nobody`` on Debian), mapped
#: to the caller by a user namespace of each sandbox's own.
SANDBOX_UID = SANDBOX_GID = 65534
#: When the host is root: the first of :data:`UID_COUNT` uids (and gids) reserved for sandboxes, one
#: leased per sandbox (0x70000000.., a range no distribution or container manager hands out).
UID_BASE = 0x70000000
UID_COUNT = 1 << 16
#: Size of the sandbox's private ``/tmp`` (a tmpfs, so host memory): without a limit an app fills
#: RAM there below its per-file size limit, one file at a time.
TMP_BYTES = 64 << 20
#: The only environment variables the sandbox sees.
ENV_ALLOWLIST = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TMPDIR": "/tmp",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}
MODES = ("bwrap", "python")
INSTALL_HINT = (
    "AWM runs model-written app and verifier code under bubblewrap, which was not found or does "
    "not work here ({why}). Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf "
    "install bubblewrap) or pass sandbox='python' to accept the weaker in-process guard."
)


class SandboxUnavailable(RuntimeError):
    """The OS sandbox (bubblewrap) is missing or does not work on this machine."""


class UidLease:
    """A sandbox uid of the reserved range, held by this host process until :meth:`close` or its exit.

    The lease is an abstract AF_UNIX name bound in the host's network namespace (which no sandbox
    can see): the kernel drops it when the last process holding the socket ends, so a host killed
    with -9 leaks nothing, and two host processes never lease one uid.
    """

    def __init__(self) -> None:
        import socket

        start = int.from_bytes(os.urandom(4), "little")
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(f"\0ttg-awm-uid-{uid}")
            except OSError:
                sock.close()
                continue
            self.uid, self._socket = uid, sock
            return
        raise SandboxUnavailable(f"all {UID_COUNT} sandbox uids from {UID_BASE} are leased")

    def close(self) -> None:
        """Give the uid back."""
        self._socket.close()

    @staticmethod
    def free(uid: int) -> bool:
        """Whether no live host process holds ``uid`` (checked by binding its name for a moment)."""
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind(f"\0ttg-awm-uid-{uid}")
            except OSError:
                return False
        return True


def python_executable() -> str:
    """``sys.executable`` with its folder's symlinks resolved: the path the sandbox mounts.

    The last component stays as it is (a venv's ``python`` link, which makes it that venv's).
    """
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


def python_path() -> list[str]:
    """``sys.path`` with symlinks resolved (the sandbox mounts real paths only)."""
    return [os.path.realpath(p) for p in sys.path if p]


def _python_roots() -> list[str]:
    roots = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for entry in sys.path:
        if entry and os.path.basename(entry) in ("site-packages", "dist-packages") and os.path.isdir(entry):
            roots.add(entry)
    # The ttg_envs package folder (four levels up from envs/awm/sandbox/host_bwrap.py).
    roots.add(str(Path(os.path.realpath(__file__)).parents[3]))
    roots = sorted(os.path.realpath(r) for r in roots if r and os.path.isdir(r))
    # Drop a root that lies inside another (bwrap would bind it twice).
    return [r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)]


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def bwrap_command(folder: str | os.PathLike, argv: list[str], uid: int | None = None, seccomp_fd: int | None = None) -> list[str]:
    """The command that runs ``argv`` (a Python command line) in the sandbox for ``folder``.

    The sandbox has:

    - new network, PID, IPC, UTS and cgroup namespaces: no network interface but a down loopback, no
      abstract AF_UNIX names of the host, and no process outside the sandbox can be named or signalled;
    - a new mount namespace whose root holds only read-only binds of the system (``/usr``), the
      Python installation, the site-packages and the ``ttg_envs`` package, a private ``/tmp`` of
      :data:`TMP_BYTES`, a minimal ``/dev`` and the sandbox's own ``/proc``; the episode folder is
      the only writable host path;
    - an unprivileged uid with no capabilities and ``no_new_privs``, one per sandbox so that its
      process limit is its own: as root, bubblewrap runs privileged and ``setpriv`` drops to a uid
      this host process leased from :data:`UID_BASE` onwards (:class:`UidLease`) before Python
      starts; as another user, a user namespace of the sandbox's own maps uid 65534 to the caller
      (the kernel counts processes per user namespace);
    - a seccomp filter refusing the kernel's most exposed calls (:mod:`.host_seccomp`);
    - an environment that holds only :data:`ENV_ALLOWLIST`, stdin on ``/dev/null`` and
      stdout/stderr on a pipe the parent reads (no descriptor of the parent but the control socket
      crosses over).

    As root the sandbox runs as ``uid`` (a :class:`UidLease`'s; required then). ``seccomp_fd``: a
    descriptor holding a seccomp program (:mod:`.host_seccomp`) that bwrap installs before ``argv``.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(INSTALL_HINT.format(why="no bwrap on PATH"))
    folder = os.path.realpath(folder)
    args = [
        bwrap,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        *_system_binds(),
    ]
    roots = _python_roots()
    # The private /tmp comes first: a Python install or checkout under /tmp (a CI clone, say) is
    # bound on top of it, where it would otherwise be hidden.
    args += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    # Mount points bwrap would create are root-only; the sandbox uid must be able to walk through them.
    parents = sorted({str(p) for r in roots for p in Path(r).parents if str(p) != "/"} - {"/tmp"})
    for parent in parents:
        args += ["--perms", "0755", "--dir", parent]
    for root in roots:
        args += ["--ro-bind", root, root]
    for parent in sorted(str(p) for p in Path(folder).parents if str(p) not in ("/", "/tmp")):
        args += ["--perms", "0755", "--dir", parent]
    args += ["--bind", folder, folder, "--chdir", folder, "--clearenv"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    for key, value in {**ENV_ALLOWLIST, "HOME": folder}.items():
        args += ["--setenv", key, value]
    if os.geteuid() == 0:
        # Privileged bwrap (no user namespace), then a real unprivileged uid: its process limit holds.
        setpriv = shutil.which("setpriv")
        if uid is None:
            raise ValueError("as root, a sandbox needs a uid of its own (UidLease)")
        if setpriv is None:
            raise SandboxUnavailable(INSTALL_HINT.format(why="running as root needs setpriv (util-linux)"))
        return args + [
            "--",
            setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            *argv,
        ]
    return (
        args[:1] + ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--cap-drop", "ALL"] + args[1:] + ["--", *argv]
    )


def needs_lease() -> bool:
    """Whether sandboxes here run as leased uids (the host is root) rather than in user namespaces."""
    return os.geteuid() == 0


def owner(uid: int | None) -> tuple[int, int] | None:
    """Who must own the episode folder so the sandbox (of ``uid``, as root) can write it (``None``: the caller)."""
    return (uid, uid) if uid is not None and os.geteuid() == 0 else None


@functools.cache
def _probe() -> str | None:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ttg-awm-probe-"))
    lease = UidLease() if needs_lease() else None
    uid = lease.uid if lease is not None else None
    try:
        if owner(uid) is not None:
            os.chown(folder, *owner(uid))
        code = "import os; print(os.getuid(), len(os.listdir('.')))"
        try:
            command = bwrap_command(folder, [python_executable(), "-I", "-S", "-c", code], uid)
            done = subprocess.run(
                command, env=dict(ENV_ALLOWLIST), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False
            )
        except SandboxUnavailable as exc:
            return str(exc)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return INSTALL_HINT.format(why=f"bwrap could not start: {exc}")
        if done.returncode != 0 or done.stdout.split() != [str(SANDBOX_UID if uid is None else uid), "0"]:
            why = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[-1]
            return INSTALL_HINT.format(why=f"bwrap failed: {why}")
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if lease is not None:
            lease.close()


def check(mode: str) -> None:
    """Raise :class:`SandboxUnavailable` unless ``mode`` can run here; warn for ``"python"``."""
    if mode not in MODES:
        raise ValueError(f"sandbox must be one of {MODES}, got {mode!r}")
    if mode == "python":
        warnings.warn(
            "AWM sandbox='python': model-written code runs with only an in-process audit hook, which "
            "code that means harm can switch off; use sandbox='bwrap' for untrusted data.",
            stacklevel=3,
        )
        return
    problem = _probe()
    if problem is not None:
        raise SandboxUnavailable(problem)
