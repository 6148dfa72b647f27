"""The seccomp filter every sandboxed command runs under (bubblewrap's
`--seccomp FD`), as a classic BPF program written out here: no library needed.

It refuses what an unprivileged command could still use to get more than its
uid gives it, or to reach another sandbox running as the same uid:

- a new user namespace (`unshare`/`clone` with CLONE_NEWUSER): inside one a
  process has every capability over the namespaces it then makes, which is the
  kernel surface the sandbox is there to keep away; `clone3` (whose flags the
  filter cannot read) answers ENOSYS, so the C library falls back to `clone`;
- the kernel keyrings (`add_key`, `keyctl`, `request_key`): a uid's keyring is
  shared by every process of that uid, so every sandbox, and it outlives them.

Built for the host's own architecture (x86_64 or aarch64) and for its 32-bit
compatibility calls (i386 through `int 0x80`, arm), whose numbers differ: a
filter that checked one table only would let the other through. x32 calls are
refused outright. A call from any other architecture kills the process."""

from __future__ import annotations

import errno
import functools
import platform
import struct
from dataclasses import dataclass

CLONE_NEWUSER = 0x10000000
X32_BIT = 0x40000000

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
LD_ABS_W = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06
ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
ERRNO = 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args are u64, little endian)


@dataclass(frozen=True)
class Table:
    """One architecture's numbers for the calls the filter looks at."""

    audit_arch: int
    clone: int
    unshare: int
    clone3: int
    keys: tuple[int, int, int]  # add_key, request_key, keyctl
    x32: bool = False  # x86_64: numbers with X32_BIT set are x32 calls


X86_64 = Table(0xC000003E, clone=56, unshare=272, clone3=435, keys=(248, 249, 250), x32=True)
I386 = Table(0x40000003, clone=120, unshare=310, clone3=435, keys=(286, 287, 288))
AARCH64 = Table(0xC00000B7, clone=220, unshare=97, clone3=435, keys=(217, 218, 219))
ARM = Table(0x40000028, clone=120, unshare=337, clone3=435, keys=(309, 310, 311))
TABLES = {"x86_64": (X86_64, I386), "amd64": (X86_64, I386), "aarch64": (AARCH64, ARM),
          "arm64": (AARCH64, ARM)}  # fmt: skip


class Unsupported(Exception):
    """No filter is written for this machine's architecture."""


@functools.cache
def program(machine: str | None = None) -> bytes:
    """The filter for `machine` (default: this one), as bwrap reads it: an array
    of `struct sock_filter`."""
    name = (machine or platform.machine()).lower()
    if name not in TABLES:
        raise Unsupported(f"no seccomp filter is written for {name!r} (only x86_64 and aarch64)")
    code = _assemble(_instructions(TABLES[name]))
    return b"".join(struct.pack("<HBBI", op, jt, jf, k) for op, jt, jf, k in code)


Op = tuple[int, str | int, str | int, int]  # (opcode, jump-if-true, jump-if-false, k): labels or 0


def _instructions(tables: tuple[Table, ...]) -> list[Op | str]:
    """Labels (str) mark places; jumps name them. Every table ends in its own returns."""
    out: list[Op | str] = [(LD_ABS_W, 0, 0, ARCH)]
    for t in tables:
        out.append((JEQ_K, f"arch{t.audit_arch}", 0, t.audit_arch))
    out.append((RET_K, 0, 0, KILL_PROCESS))
    for t in tables:
        out += [f"arch{t.audit_arch}", (LD_ABS_W, 0, 0, NR)]
        if t.x32:
            out.append((JGE_K, "deny", 0, X32_BIT))
        out.append((JEQ_K, "nosys", 0, t.clone3))
        out.append((JEQ_K, "flags", 0, t.unshare))
        out.append((JEQ_K, "flags", 0, t.clone))
        out += [(JEQ_K, "deny", 0, nr) for nr in t.keys]
        out.append((RET_K, 0, 0, ALLOW))
    out += [
        "flags",
        (LD_ABS_W, 0, 0, ARG0),
        (JSET_K, "deny", 0, CLONE_NEWUSER),
        (RET_K, 0, 0, ALLOW),
        "deny",
        (RET_K, 0, 0, ERRNO | errno.EPERM),
        "nosys",
        (RET_K, 0, 0, ERRNO | errno.ENOSYS),
    ]
    return out


def _assemble(items: list[Op | str]) -> list[tuple[int, int, int, int]]:
    """Labels to relative jumps (classic BPF jumps forward only, by at most 255)."""
    at: dict[str, int] = {}
    code: list[Op] = []
    for item in items:
        if isinstance(item, str):
            at[item] = len(code)
        else:
            code.append(item)

    def offset(target: str | int, here: int) -> int:
        if isinstance(target, int):
            return target
        jump = at[target] - here - 1
        assert 0 <= jump <= 255, (target, jump)
        return jump

    return [(op, offset(jt, i), offset(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)]
