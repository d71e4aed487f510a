"""The thread policy: how many threads torch may use, chosen from the CPUs this process may really use.

torch's default is one OpenMP thread per core the machine has, each spinning between operators
(libgomp's ``OMP_WAIT_POLICY`` default spins for a while before sleeping). Beside other busy
processes, or in a container whose CPU quota is smaller than the machine, the threads fight for
the cores: an operator waits at its barrier for a thread that was descheduled, and the spinning
threads steal the time the event loop needs. decisiond therefore chooses, before torch starts:

- the CPUs it may use: ``os.sched_getaffinity`` (taskset, cpusets) and the cgroup CPU quota
  (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), the smallest of them;
- intra-op threads: one per whole usable CPU, less one kept for the event loop, HTTP and request
  threads where that costs at most a quarter of the compute (4 CPUs or more); on fewer, the
  passive wait policy is what leaves the event loop room (measured on 2 cores, docs/benchmarks.md:
  with waiting threads asleep, 2 threads beat 1 in every column, quiet or contended);
  ``--threads N`` (``DECISIOND_THREADS``) overrides, and an ``OMP_NUM_THREADS`` the user set is kept;
- inter-op threads: 1 (the model thread runs one graph at a time; nothing forks);
- a waiting OpenMP thread spins briefly, then sleeps (``GOMP_SPINCOUNT=20000`` for libgomp instead
  of its 300,000; ``KMP_BLOCKTIME=0`` for Intel's runtime), unless the user set those variables or
  ``OMP_WAIT_POLICY`` (see :data:`decisiond.config.OPENMP_DEFAULTS` for the measurement).

Pure functions (:func:`usable_cpus`, :func:`cgroup_cpu_limit`, :func:`choose`) take their files
as arguments, so tests feed them fake cgroup trees; :func:`apply` touches torch.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("decisiond.threads")

#: Where cgroup file systems are mounted, and the file naming this process's cgroups.
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class ThreadPolicy:
    """What decisiond chose for torch; shown by ``/health`` and the start-up log line.

    Attributes:
        cpus (float): CPUs this process may use (affinity and cgroup quota; a quota may be fractional).
        intra_op (int): torch intra-op threads (``torch.set_num_threads``).
        inter_op (int): torch inter-op threads (``torch.set_num_interop_threads``).
        wait_policy (str): how waiting OpenMP threads behave (:func:`wait_policy`).
        source (str): where ``intra_op`` came from: ``auto``, ``--threads`` or ``OMP_NUM_THREADS``.
    """

    cpus: float
    intra_op: int
    inter_op: int
    wait_policy: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        """The policy as JSON-ready fields."""
        return asdict(self)

    def describe(self) -> str:
        """One line for the start-up log."""
        return (
            f"torch threads: {self.intra_op} intra-op, {self.inter_op} inter-op ({self.source}; "
            f"{self.cpus:g} CPUs usable), OpenMP wait policy {self.wait_policy}"
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _ancestors(base: Path, cgroup: str) -> list[Path]:
    """``base/a/b``, ``base/a``, ``base``: a parent's limit also binds its children."""
    parts = [p for p in cgroup.strip("/").split("/") if p and p != ".."]
    return [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _v2_limit(folder: Path) -> float | None:
    text = _read(folder / "cpu.max")  # "max 100000" or "150000 100000"
    if not text:
        return None
    fields = text.split()
    if fields[0] == "max" or len(fields) != 2:
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v1_limit(folder: Path) -> float | None:
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    try:
        q, p = int(quota or "-1"), int(period or "0")
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None  # -1: no quota


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP) -> float | None:
    """The CPU quota of this process's cgroup, in CPUs (``1.5`` = 150 ms per 100 ms), or None.

    Reads cgroup v2 (``0::/path`` in ``/proc/self/cgroup``, then ``cpu.max`` under ``root``) and v1
    (the ``cpu`` controller's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` under ``root/cpu`` or
    ``root/cpu,cpuacct``), on the process's cgroup and every ancestor (a parent's quota binds too;
    inside a container's namespace the path is ``/`` and the limit sits at the root). The smallest
    limit found wins. Missing or unreadable files mean no limit.

    Source: the kernel's cgroup-v2 and cfs-bandwidth documentation (Documentation/admin-guide/
    cgroup-v2.rst, Documentation/scheduler/sched-bwc.rst).
    """
    lines = (_read(proc_cgroup) or "").splitlines()
    limits: list[float] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            folders = _ancestors(root, path)
            limits += [x for x in map(_v2_limit, folders) if x is not None]
        elif "cpu" in controllers.split(","):
            for mount in dict.fromkeys((controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu")):
                folders = _ancestors(root / mount, path)
                limits += [x for x in map(_v1_limit, folders) if x is not None]
    return min(limits) if limits else None


def usable_cpus(
    affinity: set[int] | None = None, root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP
) -> float:
    """CPUs this process may use: the smaller of its CPU affinity and its cgroup quota (> 0).

    Args:
        affinity (set[int], optional): CPU ids; defaults to ``os.sched_getaffinity(0)`` (or
            ``os.cpu_count()`` where there is none).
        root (Path, optional): cgroup mount point. Defaults to ``/sys/fs/cgroup``.
        proc_cgroup (Path, optional): the ``/proc/self/cgroup`` file.
    """
    if affinity is None:
        affinity = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cpus = float(max(1, len(affinity)))
    quota = cgroup_cpu_limit(root, proc_cgroup)
    return min(cpus, quota) if quota is not None else cpus


def choose(cpus: float, *, threads: int | None = None, omp_num_threads: str | None = None) -> tuple[int, str]:
    """Intra-op threads for ``cpus`` usable CPUs, and where the number came from.

    ``threads`` (``--threads``) wins; then a positive integer ``OMP_NUM_THREADS`` the user set;
    else one thread per whole usable CPU (``floor(cpus)``, at least 1), less one kept for the event
    loop and request threads from :data:`RESERVE_FROM` CPUs up: a 1.5-CPU quota gets 1, 2 CPUs get
    2, 3 get 3, 4 get 3, 8 get 7.

    Raises:
        ValueError: ``threads`` is below 1.
    """
    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads must be at least 1, got {threads}")
        return threads, "--threads"
    if omp_num_threads and omp_num_threads.strip().isdigit() and int(omp_num_threads) > 0:
        return int(omp_num_threads), "OMP_NUM_THREADS"
    whole = max(1, math.floor(cpus))
    return (whole - 1 if whole >= RESERVE_FROM else whole), "auto"


#: From this many usable CPUs, one is kept for the event loop (below, keeping one would cost a
#: third or half of the compute; the passive wait policy leaves the loop room instead).
RESERVE_FROM = 4

_applied: ThreadPolicy | None = None


def apply(threads: int | None = None) -> ThreadPolicy:
    """Choose the policy and give it to torch; call before any torch work (the model's load).

    The OpenMP variables must already be in the environment when torch is first imported (see
    :func:`decisiond.config.openmp_env`); this sets torch's intra-op and inter-op thread counts.
    Calling it again re-applies the intra-op count (inter-op threads cannot change once used).

    Returns:
        ThreadPolicy: what was chosen (also :func:`applied`).
    """
    global _applied
    from .config import openmp_env

    env = openmp_env()
    cpus = usable_cpus()
    intra_op, source = choose(cpus, threads=threads, omp_num_threads=env.get("OMP_NUM_THREADS"))

    import torch

    torch.set_num_threads(intra_op)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or inter-op work already ran: keep what torch has
        log.debug("torch's inter-op threads were already fixed at %d", torch.get_num_interop_threads())
    _applied = ThreadPolicy(
        cpus=round(cpus, 2),
        intra_op=torch.get_num_threads(),
        inter_op=torch.get_num_interop_threads(),
        wait_policy=wait_policy(env),
        source=source,
    )
    return _applied


def wait_policy(env: dict[str, str]) -> str:
    """How waiting OpenMP threads behave under ``env``: the user's ``OMP_WAIT_POLICY``, else
    ``spin N, then sleep`` (``GOMP_SPINCOUNT``), else ``default``."""
    if env.get("OMP_WAIT_POLICY"):
        return env["OMP_WAIT_POLICY"]
    if env.get("GOMP_SPINCOUNT"):
        return f"spin {env['GOMP_SPINCOUNT']}, then sleep"
    return "default"


def applied() -> ThreadPolicy | None:
    """The policy :func:`apply` chose in this process, or None when it was not called."""
    return _applied
