"""The sandbox's first process (standard library only): namespaces, a read-only root, limits.

Started per worker as ``python -s -S -B sandbox_init.py SPEC`` (JSON, from
``sandbox.launch_spec``); it never imports the project. Each step is a plain Linux system call
through ``ctypes`` (``os.unshare`` needs Python 3.12):

1. Drop supplementary groups (as root), ``unshare`` new user, mount, PID, network, IPC and UTS
   namespaces, print ``{"sandbox": "unshared"}`` and wait for ``go`` while the starting
   process writes the uid/gid maps (``SPEC["uid"]`` inside = the same id outside).
2. Become that id, fork the sandbox's PID 1 and wait for it. This process watches the starting
   process (``SPEC["launcher"]``) through a pidfd and kills PID 1 when it exits (its own
   ``PR_SET_PDEATHSIG`` would fire when the starting *thread* exits; it is the fallback
   before Linux 5.3). PID 1 dies by ``PR_SET_PDEATHSIG`` and takes its namespace with it.
3. PID 1 pivots into a tmpfs holding read-only binds of ``SPEC["binds"]``, the host's
   ``/bin``, ``/lib``... links, five devices, its own ``/proc``, a private ``/tmp`` of
   ``SPEC["scratch_mb"]`` MiB and ``/etc/ld.so.cache``, and detaches the old root; disables
   nested user namespaces, drops every capability (bounding set too), sets ``no_new_privs``
   and execs ``SPEC["argv"]`` with ``SPEC["env"]`` as the whole environment.

Any failure is printed as ``{"sandbox_error": "..."}`` on stdout, and the process exits 3.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import select
import signal
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MNT_DETACH = 0x2
# statvfs f_flag bit -> mount flag it must keep on a read-only remount (a user namespace may
# not clear nosuid/nodev/noexec/atime flags its parent set: EPERM otherwise)
KEPT_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)

PR_SET_PDEATHSIG = 1
SYS_PIDFD_OPEN = 434  # the same number on every architecture (Linux >= 5.3)
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
LAST_CAPABILITY = 63  # PR_CAPBSET_DROP fails with EINVAL past the kernel's last one
SYS_PIVOT_ROOT = {
    "x86_64": 155,
    "aarch64": 41,
    "arm64": 41,
    "riscv64": 41,
    "loongarch64": 41,
    "ppc64le": 203,
    "ppc64": 203,
    "s390x": 217,
    "i686": 217,
    "i386": 217,
    "armv7l": 218,
}
DEVICES = ("null", "zero", "full", "random", "urandom")
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "fd/0", "stdout": "fd/1", "stderr": "fd/2"}
libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(Exception):
    """A step of the set-up failed; the message says which and why."""


def _check(result: int, what: str) -> None:
    if result == -1:
        errno = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(errno)} (errno {errno})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def c(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    what = f"mount {source or fstype or ''} on {target}"
    _check(libc.mount(c(source), c(target), c(fstype), ctypes.c_ulong(flags), c(data)), what)


def _prctl(option: int, value: int, what: str) -> None:
    _check(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), what)


def _pivot_root(new_root: str, put_old: str) -> None:
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SandboxError(f"pivot_root: unknown system call number on {platform.machine()}")
    _check(libc.syscall(number, os.fsencode(new_root), os.fsencode(put_old)), "pivot_root")


def _bind_read_only(source: int, target: str) -> None:
    """Bind the file or folder open as ``source`` at ``target`` read-only, keeping the flags
    that the parent namespace locked (a user namespace may not clear them: EPERM otherwise)."""
    if stat.S_ISDIR(os.stat(source).st_mode):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()  # noqa: SIM115 - a mount point, closed at once
    # through the descriptor opened before the ids changed (see main)
    _mount(f"/host/proc/self/fd/{source}", target, None, MS_BIND)
    kept = os.statvfs(source).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
    if not target.startswith("/new/dev/"):
        flags |= MS_NODEV
    for stat_flag, mount_flag in KEPT_FLAGS:
        if kept & stat_flag:
            flags |= mount_flag
    _mount(None, target, None, flags)


def _open_binds(spec: dict) -> list[tuple[int, str]]:
    """``O_PATH`` descriptors of everything to bind, opened with the caller's own rights."""
    binds = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.isdir(host) and not os.path.islink(host):
            binds.append((host, host))
    binds += [(f"/dev/{name}", f"/dev/{name}") for name in DEVICES]
    binds += [tuple(pair) for pair in spec["binds"]]
    opened = []
    for source, target in binds:
        try:
            opened.append((os.open(source, os.O_PATH | os.O_CLOEXEC), target))
        except OSError as error:
            raise SandboxError(
                f"cannot open {source} to bind it into the sandbox: {error}"
            ) from None
    return opened


def _build_root(spec: dict, binds: list[tuple[int, str]]) -> None:
    """Pivot into a fresh tmpfs holding only what the sandbox may see; detach the host's root."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # stage on a tmpfs over /tmp (any existing folder would do): the host's root stays at
    # /host until the final pivot
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    os.mkdir("/tmp/host")
    os.mkdir("/tmp/new")
    _pivot_root("/tmp", "/tmp/host")
    os.chdir("/")
    _mount("tmpfs", "/new", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink(f"/host/{name}"):
            os.symlink(os.readlink(f"/host/{name}"), f"/new/{name}")
    for source, target in binds:
        _bind_read_only(source, f"/new{target}")
        os.close(source)
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, f"/new/dev/{name}")
    os.mkdir("/new/proc")
    _mount("proc", "/new/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir("/new/tmp")
    scratch = f"size={int(spec['scratch_mb'])}m,mode=1777"
    _mount("tmpfs", "/new/tmp", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    os.chdir("/new")
    _pivot_root(".", ".")  # the staging root now lies on top of the new one ...
    _check(libc.umount2(b".", MNT_DETACH), "detach the host's root")  # ... and is gone
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    with open("/proc/sys/user/max_user_namespaces", "w") as handle:
        handle.write("0")


def _drop_privileges() -> None:
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    for capability in range(LAST_CAPABILITY + 1):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) == -1:
            break  # EINVAL: past the last capability this kernel knows


def _watch_launcher(launcher: int) -> int | None:
    """A pidfd of the starting process (readable once it exits), or None where the kernel
    has no ``pidfd_open``. Exits at once when that process is already gone."""
    fd = libc.syscall(SYS_PIDFD_OPEN, launcher, 0)
    if fd == -1 and ctypes.get_errno() == errno.ESRCH:
        os._exit(3)
    if fd == -1:
        return None  # ENOSYS, or EPERM from a container's system call filter
    if os.getppid() != launcher:  # it died before the pidfd was taken: its pid may be reused
        os._exit(3)
    return fd


def _wait_for(child: int, launcher_fd: int | None) -> int:
    """Waits for PID 1 and returns its wait status; kills it first if the starting process
    exits (``launcher_fd`` readable)."""
    child_fd = libc.syscall(SYS_PIDFD_OPEN, child, 0) if launcher_fd is not None else -1
    if child_fd != -1:
        poller = select.poll()
        poller.register(launcher_fd, select.POLLIN)
        poller.register(child_fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll()]
        if child_fd not in ready:
            os.kill(child, signal.SIGKILL)
    return os.waitpid(child, 0)[1]


def _report(payload: dict) -> None:
    os.write(1, (json.dumps(payload) + "\n").encode())


def _wait_for_go() -> None:
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)  # one byte at a time: what follows "go" belongs to the worker
        if not byte:
            raise SandboxError("the starting process went away before writing the id maps")
        line += byte
    if line != b"go\n":
        raise SandboxError(f"the starting process could not write the id maps: {line!r:.300}")


def _sandbox_init(spec: dict, binds: list[tuple[int, str]]) -> None:
    """PID 1 of the new PID namespace: build the root, drop everything, exec the worker."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
    _build_root(spec, binds)
    _drop_privileges()
    os.chdir("/tmp")
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def _arrange_descriptors(extra: list[int]) -> None:
    """The extra protocol pipes arrive at arbitrary numbers: move them to 3, 4, ..."""
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in extra]
    for fd in extra:
        os.close(fd)
    for number, fd in enumerate(moved, start=3):
        os.dup2(fd, number)
        os.close(fd)


def main() -> None:
    spec = json.loads(sys.argv[1])
    os.umask(0o022)
    try:
        _arrange_descriptors(spec["pass_fds"])
        if not spec["isolate"]:  # a trusted pool where the kernel refuses namespaces
            os.execve(spec["argv"][0], spec["argv"], spec["env"])
        launcher_fd = _watch_launcher(spec["launcher"])
        if os.geteuid() == 0:
            os.setgroups([])
        _check(libc.unshare(NAMESPACES), "unshare(user, mount, pid, net, ipc, uts)")
        # in the new mount namespace (a bind's source must be in it), still with the caller's
        # own ids (the sandbox's id may not walk an interpreter's path under /root, mode 0700)
        binds = _open_binds(spec)
        _report({"sandbox": "unshared"})
        _wait_for_go()
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
        if launcher_fd is None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
        child = os.fork()
        if child == 0:
            try:
                _sandbox_init(spec, binds)
            except (SandboxError, OSError) as error:
                _report({"sandbox_error": f"sandbox set-up: {error}"})
            os._exit(3)
    except (SandboxError, OSError) as error:
        _report({"sandbox_error": str(error)})
        sys.exit(3)
    for fd in range(3 + len(spec["pass_fds"])):
        os.close(fd)  # only the sandbox holds the protocol pipes
    status = _wait_for(child, launcher_fd)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
