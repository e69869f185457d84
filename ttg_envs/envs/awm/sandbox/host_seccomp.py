"""Host side: the seccomp filter bwrap installs before the fork server starts (``bwrap --seccomp FD``).

A deny list, not an allow list: FastAPI, SQLAlchemy and the apps' own imports need a wide and
changing set of system calls, while the kernel's most exposed surfaces are calls no AWM app needs.
Refused with ``EPERM``: new namespaces (``unshare``, ``setns``, ``clone`` with a namespace flag),
``ptrace`` and cross-process memory, the keyring, ``bpf``, ``userfaultfd``, ``perf_event_open``,
``io_uring``, mounts (old and new API), modules, ``kexec``, ``reboot``, swap, ``acct``, handle-based
opens; ``clone3`` gets ``ENOSYS`` (its flags sit behind a pointer the filter cannot read; glibc then
falls back to ``clone``, whose flags it can). x32 system calls are refused too. The program is built for
x86-64 only; elsewhere :func:`program` is None and the sandbox runs without it.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
#: x86-64 numbers of the refused calls.
DENIED = {
    "ptrace": 101,
    "pivot_root": 155,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "init_module": 175,
    "delete_module": 176,
    "lookup_dcookie": 212,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
}
_CLONE = 56
_CLONE3 = 435
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
_CLONE_NAMESPACES = 0x7E020000


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter as a classic BPF program (``struct sock_filter[]``), or None off x86-64."""
    if platform.machine() != "x86_64":
        return None
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    body = [_insn(ld_abs, 0, 0, 4), _insn(jeq, 1, 0, _AUDIT_ARCH_X86_64), _insn(ret, 0, 0, eperm)]
    body += [_insn(ld_abs, 0, 0, 0), _insn(jge, 0, 1, _X32_BIT), _insn(ret, 0, 0, eperm)]
    for nr in sorted(DENIED.values()):
        body += [_insn(jeq, 0, 1, nr), _insn(ret, 0, 0, eperm)]
    body += [_insn(jeq, 0, 1, _CLONE3), _insn(ret, 0, 0, enosys)]
    # clone: its flags are the low word of the first argument (offset 16 of struct seccomp_data).
    body += [_insn(jeq, 0, 3, _CLONE), _insn(ld_abs, 0, 0, 16), _insn(jset, 0, 1, _CLONE_NAMESPACES), _insn(ret, 0, 0, eperm)]
    body += [_insn(ret, 0, 0, _RET_ALLOW)]
    return b"".join(body)


def open_program() -> int | None:
    """A descriptor (at offset 0) holding :func:`program`, for ``bwrap --seccomp``; None off x86-64."""
    data = program()
    if data is None:
        return None
    fd = os.memfd_create("ttg-awm-seccomp", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
