"""The thread policy: usable CPUs from affinity and fake cgroup trees, and the threads chosen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from decisiond.threads import cgroup_cpu_limit, choose, usable_cpus


def _tree(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(self_cgroup)
    return root, proc


def test_v2_quota_in_a_container_namespace(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "150000 100000\n"})
    assert cgroup_cpu_limit(root, proc) == pytest.approx(1.5)
    assert usable_cpus({0, 1, 2, 3}, root, proc) == pytest.approx(1.5)


def test_v2_no_quota_is_max(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, "0::/app.slice\n", {"cpu.max": "max 100000\n", "app.slice/cpu.max": "max 100000\n"})
    assert cgroup_cpu_limit(root, proc) is None
    assert usable_cpus({0, 1, 2, 3}, root, proc) == 4


def test_v2_a_parent_quota_binds_its_child(tmp_path: Path) -> None:
    """The process sits in a child cgroup without a quota under a parent limited to 3 CPUs."""
    files = {"a/cpu.max": "300000 100000", "a/b/cpu.max": "max 100000", "a/b/c/cpu.max": "800000 100000"}
    root, proc = _tree(tmp_path, "0::/a/b/c\n", files)
    assert cgroup_cpu_limit(root, proc) == pytest.approx(3.0)


def test_v1_cfs_quota(tmp_path: Path) -> None:
    files = {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "250000\n", "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, "12:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n", files)
    assert cgroup_cpu_limit(root, proc) == pytest.approx(2.5)
    assert usable_cpus({0, 1, 2, 3, 4, 5, 6, 7}, root, proc) == pytest.approx(2.5)


def test_v1_unlimited_quota_is_minus_one(tmp_path: Path) -> None:
    files = {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, "2:cpu:/\n", files)
    assert cgroup_cpu_limit(root, proc) is None


@pytest.mark.parametrize(
    "self_cgroup,files",
    [
        ("", {}),  # no /proc/self/cgroup
        ("0::/\n", {"cpu.max": "garbage"}),
        ("0::/\n", {"cpu.max": "0 100000"}),
        ("2:cpu:/\n", {"cpu/cpu.cfs_quota_us": "x", "cpu/cpu.cfs_period_us": "100000"}),
        ("0::/../../etc\n", {}),
    ],
)
def test_missing_or_unreadable_files_mean_no_limit(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> None:
    root, proc = _tree(tmp_path, self_cgroup, files)
    assert cgroup_cpu_limit(root, proc) is None
    assert usable_cpus({0, 1}, root, proc) == 2


def test_affinity_smaller_than_the_quota_wins(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "400000 100000"})
    assert usable_cpus({3}, root, proc) == 1


@pytest.mark.parametrize(
    "cpus,expected",
    [(0.5, 1), (1.0, 1), (1.5, 1), (2.0, 2), (2.5, 2), (3.0, 3), (4.0, 3), (4.9, 3), (8.0, 7), (64.0, 63)],
)
def test_auto_keeps_one_cpu_for_the_event_loop_from_four(cpus: float, expected: int) -> None:
    assert choose(cpus) == (expected, "auto")


def test_the_flag_wins_then_the_users_omp_num_threads() -> None:
    assert choose(2.0, threads=4, omp_num_threads="3") == (4, "--threads")
    assert choose(8.0, omp_num_threads="3") == (3, "OMP_NUM_THREADS")
    assert choose(8.0, omp_num_threads="lots") == (7, "auto")  # not a count: ignored
    assert choose(8.0, omp_num_threads="0") == (7, "auto")
    with pytest.raises(ValueError, match="at least 1"):
        choose(2.0, threads=0)


def test_the_cli_sets_the_openmp_wait_policy_before_torch_is_imported() -> None:
    """A fresh interpreter running the CLI's entry must have the short spin in the environment when
    torch loads (libgomp reads it once), must keep a value the user set, and must set no spin count
    beside a wait policy the user chose (GOMP_SPINCOUNT would override it)."""
    code = (
        "import os, sys\n"
        "from decisiond import cli\n"
        "assert 'torch' not in sys.modules, 'the CLI imported torch before choosing the thread policy'\n"
        "from decisiond.config import quiet_openmp_env\n"
        "assert quiet_openmp_env()\n"
        "print(os.environ.get('GOMP_SPINCOUNT', '-'), os.environ['KMP_BLOCKTIME'])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "KMP_BLOCKTIME": "7"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["20000", "7"]
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["-", "7"]
