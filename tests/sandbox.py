"""The unit's sandbox for tests: its properties for `systemd-run`, or, where systemd is not running,
the parts that can stop a model runtime emulated for one process (root only).

Emulated: the system-call filter (`SystemCallFilter=` lines expanded by `systemd-analyze
syscall-filter`, the rest answered with `SystemCallErrorNumber=`), `MemoryDenyWriteExecute=`,
`ProcSubset=` and `ProtectProc=` (a private /proc), `NoNewPrivileges=` and an empty
`CapabilityBoundingSet=`. Not emulated: users, mounts other than /proc, IP and device lists.

`python tests/sandbox.py UNIT -- ARGV...` runs ARGV so, inside `unshare -m` (see `emulated`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import subprocess
import sys
from pathlib import Path

# what a unit file says that is not sandboxing, or names paths that only exist on a deployed box
NOT_SANDBOX = {
    "Type", "NotifyAccess", "ExecStartPre", "ExecStart", "Restart", "RestartSec", "TimeoutStartSec",
    "TimeoutStopSec", "WatchdogSec", "DynamicUser", "StateDirectory", "CacheDirectory", "WorkingDirectory",
    "EnvironmentFile", "Environment", "LoadCredential",
}


def service_entries(unit: Path) -> list[tuple[str, str]]:
    """(key, value) of the [Service] section, in order (comments and other sections left out)."""
    out, section = [], None
    for line in unit.read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and line and not line.startswith(("#", ";")) and "=" in line:
            key, value = line.split("=", 1)
            out.append((key.strip(), value.strip()))
    return out


def run_properties(unit: Path) -> list[str]:
    """The unit's sandboxing as `systemd-run -p` properties."""
    return [f"{k}={v}" for k, v in service_entries(unit) if k not in NOT_SANDBOX]


@functools.cache
def expand(group: str) -> frozenset[str]:
    """The system calls of a `@group` (nested groups expanded) or of one call's name."""
    if not group.startswith("@"):
        return frozenset({group})
    out = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True, text=True,
                         check=True).stdout
    names: set[str] = set()
    for line in out.splitlines()[1:]:
        line = line.strip()
        if line and not line.startswith("#"):
            names |= expand(line)
    return frozenset(names)


def allowed_syscalls(unit: Path) -> set[str] | None:
    """What `SystemCallFilter=` lines allow, as systemd reads them: the first line decides whether
    it is an allow-list (no `~`); later `~` lines take calls out of it. None: no filter."""
    allowed: set[str] | None = None
    for key, value in service_entries(unit):
        if key != "SystemCallFilter" or not value:
            continue
        deny = value.startswith("~")
        names = set().union(*(expand(n) for n in value.lstrip("~").split()))
        if allowed is None:
            if deny:
                raise NotImplementedError("a deny-list filter is not emulated")
            allowed = names
        elif deny:
            allowed -= names
        else:
            allowed |= names
    return allowed


def setting(unit: Path, key: str, default: str = "") -> str:
    values = [v for k, v in service_entries(unit) if k == key]
    return values[-1] if values else default


def emulated(unit: Path) -> list[str]:
    """The start of a command line that runs the rest in the emulated sandbox of `unit` (in a
    mount namespace of its own, for its /proc)."""
    return ["unshare", "-m", "--propagation", "private", sys.executable, str(Path(__file__).resolve()),
            str(unit), "--"]


# -- the launcher: runs inside the new mount namespace, then execs ARGV -------------------------
class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


SCMP_ACT_ALLOW = 0x7FFF0000
MASKED_EQ = 7
PROT_WRITE, PROT_EXEC, SHM_EXEC = 0x2, 0x4, 0o100000


def _mount_proc(subset: str, hidepid: str) -> None:
    opts = ",".join(o for o in (f"subset={subset}" if subset == "pid" else "",
                                f"hidepid={hidepid}" if hidepid not in ("", "default") else "") if o)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"proc", b"/proc", b"proc", 0, opts.encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mount proc -o {opts}")


def _drop_privileges() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: exec leaves root with no capability
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "no_new_privs")


def _seccomp(allowed: set[str], errno_: int, deny_write_execute: bool) -> None:
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(0x00050000 | errno_)  # SCMP_ACT_ERRNO(errno_)

    def allow(name: str, *conds: tuple[int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr == -1:  # not a call of this architecture
            return
        arr = (_ArgCmp * max(1, len(conds)))(*[_ArgCmp(a, MASKED_EQ, m, v) for a, m, v in conds])
        lib.seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, len(conds), arr)

    # MemoryDenyWriteExecute= as systemd does it: no mapping both writable and executable, no
    # mprotect that makes memory executable, no executable shared memory
    guarded = {"mmap", "mmap2", "mprotect", "pkey_mprotect", "shmat"} if deny_write_execute else set()
    for name in sorted(allowed - guarded):
        allow(name)
    for name in guarded & allowed:
        if name in ("mmap", "mmap2"):
            for prot in (0, PROT_WRITE, PROT_EXEC):
                allow(name, (2, PROT_WRITE | PROT_EXEC, prot))
        elif name == "shmat":
            allow(name, (2, SHM_EXEC, 0))
        else:
            allow(name, (2, PROT_EXEC, 0))
    if lib.seccomp_load(ctx) != 0:
        raise OSError(ctypes.get_errno(), "seccomp_load")


def _launch(unit: Path, argv: list[str]) -> None:
    allowed = allowed_syscalls(unit)
    number = setting(unit, "SystemCallErrorNumber", "EPERM")
    _drop_privileges()  # reads /proc/sys: before /proc loses it
    _mount_proc(setting(unit, "ProcSubset", "all"), setting(unit, "ProtectProc", "default"))
    if allowed is not None:
        mdwe = setting(unit, "MemoryDenyWriteExecute", "no") in ("yes", "true", "1", "on")
        _seccomp(allowed, getattr(errno, number), mdwe)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    split = sys.argv.index("--")
    _launch(Path(sys.argv[1]), sys.argv[split + 1:])
