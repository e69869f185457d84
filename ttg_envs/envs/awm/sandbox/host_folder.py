"""Host side: an episode folder the sandboxed child can write, handled by the parent without following its paths.

The child (model-written app code) may put anything in its folder: a symlink named ``episode.db``
pointing anywhere, a directory in its place, a FIFO, a file of gigabytes. The parent therefore holds
the folder open as a directory descriptor and touches entries only relative to it, with
``O_NOFOLLOW`` and an ``fstat`` check that the entry is a regular file, never through a path name;
files it hands back to sqlite are first copied out (through the descriptor) into a private folder
the child cannot reach. Clearing the folder removes what is there without following links.

A sandbox's folder (:meth:`EpisodeFolder.locked`) is named ``ttg-awm-sbx-*`` only once this process
holds an ``flock`` on it, and so are the parent's scratch folders (:func:`scratch_folder`:
``ttg-awm-private-*``, ``ttg-awm-build-*``); the kernel drops the lock when the process ends, however
it ends, so :func:`remove_abandoned` knows a folder whose lock it can take for one a dead host left.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class UnsafeEntry(OSError):
    """An episode file is missing, a link, a directory or too large: the child tampered with it."""


#: Largest episode file the parent copies out (bytes); the child's file-size limit is the same.
MAX_FILE_BYTES = 256 << 20
#: What all the files of one sandbox's folder may add up to (bytes on disk, and entries): checked
#: after each tool call (:meth:`EpisodeFolder.usage`). Where the host can mount (root), the folder
#: is also a tmpfs of :func:`kernel_quota`, so the kernel stops an app inside the call too.
DISK_BYTES = 1 << 30
DISK_FILES = 10_000
#: Name prefix of sandbox folders held by a live host (locked), which :func:`remove_abandoned` sweeps.
LOCKED_PREFIX = "ttg-awm-sbx-"
#: Name prefixes of the parent's scratch folders (:func:`scratch_folder`), locked the same way.
SCRATCH_PREFIXES = ("ttg-awm-private-", "ttg-awm-build-")
#: Name prefix a folder has before it is locked; :func:`remove_abandoned` takes such a folder only
#: when it is older than :data:`NEW_GRACE_S` (its host died in the instant between mkdir and lock).
NEW_PREFIX = "ttg-awm-new-"
NEW_GRACE_S = 60.0


def _locked_folder(prefix: str, root: str | None = None) -> tuple[Path, int]:
    """``(path, descriptor)`` of a new folder under ``root`` named ``prefix*`` once the descriptor holds its ``flock``."""
    path = Path(tempfile.mkdtemp(prefix=NEW_PREFIX, dir=root))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        final = path.with_name(prefix + path.name.removeprefix(NEW_PREFIX))
        os.rename(path, final)
    except BaseException:
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise
    return final, fd


def kernel_quota() -> tuple[int, int]:
    """``(bytes, inodes)`` of a sandbox folder's tmpfs: :data:`DISK_BYTES` and :data:`DISK_FILES` and
    1/16 more, so the check after a call still sees (and names) a crossing, while no call, however
    long, writes past this."""
    return DISK_BYTES + (DISK_BYTES >> 4), DISK_FILES + (DISK_FILES >> 4) + 16


_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount_tmpfs(path: Path, owner: tuple[int, int] | None) -> bool:
    """Mount a tmpfs of :func:`kernel_quota` on ``path`` (root only); False where the host cannot."""
    if os.geteuid() != 0:
        return False
    size, inodes = kernel_quota()
    options = f"size={size},nr_inodes={inodes},mode=0700"
    if owner is not None:
        options += f",uid={owner[0]},gid={owner[1]}"
    return _libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) == 0


def _unmount(path: str | os.PathLike) -> None:
    _libc().umount2(os.fsencode(path), _MNT_DETACH)  # lazily: a descriptor still open on it does not block it


class EpisodeFolder:
    """A folder created by the parent, owned (when the parent is root) by the sandbox uid."""

    #: True when the folder is a tmpfs of :func:`kernel_quota` (see :meth:`locked`).
    kernel_bounded: bool = False
    _lock: int | None = None  # the descriptor holding the outer folder's flock (:meth:`locked`)

    def __init__(self, prefix: str = "ttg-awm-", owner: tuple[int, int] | None = None):
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self.owner = owner
        self._parent: tuple[EpisodeFolder, str] | None = None
        self._children: set[str] = set()
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        if owner is not None:
            os.fchown(self._fd, *owner)

    @classmethod
    def locked(cls, owner: tuple[int, int] | None = None, kernel_bounded: bool = False) -> EpisodeFolder:
        """A new folder ``files`` inside one that this process holds an ``flock`` on, under a :data:`LOCKED_PREFIX` name.

        The outer folder is made under another name and renamed once locked, so a sweep never sees
        it unlocked. With ``kernel_bounded``, where the host can mount (root), ``files`` is a tmpfs
        of :func:`kernel_quota` (its pages count against the memory cgroup of whoever writes them);
        :attr:`kernel_bounded` says whether it is. The lock is on the outer folder, never a mount.
        """
        outer, lock = _locked_folder(LOCKED_PREFIX)
        folder = object.__new__(cls)
        folder.path, folder.owner, folder._parent, folder._children = outer / "files", owner, None, set()
        folder._lock, folder._fd, folder.kernel_bounded = lock, None, False
        try:
            os.mkdir(folder.path, 0o700)
            folder.kernel_bounded = kernel_bounded and _mount_tmpfs(folder.path, owner)
            folder._fd = os.open(folder.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            if owner is not None:
                os.fchown(folder._fd, *owner)
        except BaseException:
            folder.close()
            raise
        return folder

    def read(self, name: str, limit: int = MAX_FILE_BYTES) -> bytes:
        """The bytes of regular file ``name``; :class:`UnsafeEntry` if it is anything else."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self._fd)
        except FileNotFoundError:
            raise UnsafeEntry(f"{name} is missing") from None
        except OSError as exc:  # ELOOP: a symlink
            raise UnsafeEntry(f"{name} cannot be opened safely ({os.strerror(exc.errno)})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeEntry(f"{name} is not a regular file")
            if info.st_size > limit:
                raise UnsafeEntry(f"{name} is larger than {limit} bytes")
            chunks, left = [], limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
            if len(data) > limit:
                raise UnsafeEntry(f"{name} is larger than {limit} bytes")
            return data
        finally:
            os.close(fd)

    def read_optional(self, name: str) -> bytes | None:
        """Like :meth:`read`, but ``None`` when ``name`` does not exist."""
        try:
            os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return self.read(name)

    def write(self, name: str, data: bytes) -> None:
        """Create ``name`` (which must not exist) with ``data``, owned by the sandbox uid."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self._fd)
        try:
            if self.owner is not None:
                os.fchown(fd, *self.owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def subfolder(self, prefix: str) -> EpisodeFolder:
        """A new, empty folder inside this one.

        A child racing it (renaming or replacing the new entry) gets a folder of its own making
        inside this one: every later access goes through the descriptor opened here, never the name.
        """
        for _ in range(100):
            name = prefix + os.urandom(6).hex()
            try:
                os.mkdir(name, 0o700, dir_fd=self._fd)
            except FileExistsError:
                continue
            sub = object.__new__(EpisodeFolder)
            sub.path, sub.owner, sub._parent, sub._children = self.path / name, self.owner, (self, name), set()
            self._children.add(name)
            sub._fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self._fd)
            if self.owner is not None:
                os.fchown(sub._fd, *self.owner)
            return sub
        raise FileExistsError("no free folder name")

    def clear(self) -> None:
        """Remove every entry (links are removed, never followed; directories recursively)."""
        for name in os.listdir(self._fd):
            try:
                info = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(name, dir_fd=self._fd)
                else:
                    os.unlink(name, dir_fd=self._fd)
            except FileNotFoundError:
                pass

    def usage(self, max_files: int | None = None) -> tuple[int, int]:
        """``(bytes on disk, entries)`` of everything in the folder, links not followed; the walk
        stops after ``max_files`` (default :data:`DISK_FILES`) + 1 entries (a folder of a million
        files costs no more than that)."""
        max_files = DISK_FILES if max_files is None else max_files
        used = files = 0
        for _, dirs, names, fd in os.fwalk(".", dir_fd=self._fd, follow_symlinks=False):
            for name in dirs + names:
                files += 1
                try:
                    used += os.stat(name, dir_fd=fd, follow_symlinks=False).st_blocks * 512
                except OSError:
                    pass
                if files > max_files:
                    return used, files
        return used, files

    def prune(self, keep: set[str]) -> None:
        """Remove every entry but ``keep`` and the subfolders this host made here."""
        for name in os.listdir(self._fd):
            if name not in keep and name not in self._children:
                try:
                    self.remove(name)
                except OSError:
                    pass

    def remove(self, name: str) -> None:
        """Remove entry ``name`` if present, whatever it is."""
        self._children.discard(name)
        try:
            info = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(name, dir_fd=self._fd)
        else:
            os.unlink(name, dir_fd=self._fd)

    def close(self, delete: bool = True) -> None:
        """Release the descriptor and (by default) delete the folder."""
        if self._fd is None and self._lock is None:
            return
        try:
            if delete and self._fd is not None:
                self.clear()
        finally:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None
            if delete:
                try:
                    if self._parent is not None:
                        parent, name = self._parent
                        if parent._fd is not None:
                            parent.remove(name)
                    else:
                        if self.kernel_bounded:
                            _unmount(self.path)
                        os.rmdir(self.path)
                        if self._lock is not None:
                            os.rmdir(self.path.parent)
                except OSError:
                    pass
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None


@contextmanager
def scratch_folder(prefix: str = SCRATCH_PREFIXES[0]) -> Iterator[Path]:
    """A parent-only scratch folder (mode 0700, never bound into a sandbox), deleted on exit.

    This process holds its ``flock`` while it exists, so if the process is killed inside the block
    (``kill -9``) the next :func:`remove_abandoned` deletes it.
    """
    if prefix not in SCRATCH_PREFIXES:
        raise ValueError(f"scratch prefix must be one of {SCRATCH_PREFIXES}")
    path, fd = _locked_folder(prefix)
    try:
        yield path
    finally:
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)


def remove_abandoned(root: str | os.PathLike | None = None) -> list[str]:
    """Delete the sandbox and scratch folders under ``root`` (the temp folder) whose host process is gone; their names.

    A folder counts as abandoned when its ``flock`` can be taken: its host died (``kill -9``, a
    crash) before it could delete it (a not yet locked ``ttg-awm-new-*`` folder only once it is
    older than :data:`NEW_GRACE_S`). Entries are removed without following links.
    """
    root = Path(root or tempfile.gettempdir())
    removed = []
    swept = (LOCKED_PREFIX, *SCRATCH_PREFIXES)
    try:
        names = [n for n in os.listdir(root) if n.startswith(swept)]
        for name in os.listdir(root):
            if name.startswith(NEW_PREFIX):
                try:
                    if time.time() - os.stat(root / name, follow_symlinks=False).st_ctime > NEW_GRACE_S:
                        names.append(name)
                except OSError:
                    pass
    except OSError:
        return removed
    for name in names:
        try:
            fd = os.open(root / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # gone meanwhile, a link, or another user's
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live host holds it
            os.close(fd)
            continue
        try:
            outer = os.fstat(fd)
            for entry in os.listdir(fd):
                info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and info.st_dev != outer.st_dev:  # a dead host's tmpfs
                    _unmount(root / name / entry)
                    info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry, dir_fd=fd)
                else:
                    os.unlink(entry, dir_fd=fd)
            os.rmdir(root / name)
            removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
