"""Sizing the process pool (mbb.batch.cpus): the CPUs this process may use (affinity, cgroup v1
and v2 quotas) less the load of others, one process whenever a pool would not pay. Every input
is injected; nothing here is timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mbb.batch import cpus
from mbb.batch.cpus import PARALLEL_FROM, CpuBudget, cgroup_quota, current_load, pool_size


@pytest.mark.parametrize(
    ("runs", "budget", "expected"),
    [
        (200, CpuBudget(cpus=2, quota=None, load=1.0), 2),  # idle 2-core host: both cores
        (200, CpuBudget(cpus=2, quota=None, load=1.2), 2),  # a little noise
        (200, CpuBudget(cpus=2, quota=None, load=2.0), 1),  # one other busy process
        (200, CpuBudget(cpus=2, quota=None, load=5.0), 1),  # four busy loops: the 1.3x case
        (200, CpuBudget(cpus=2, quota=None, load=0.0), 2),
        (PARALLEL_FROM - 1, CpuBudget(cpus=2, quota=None, load=1.0), 1),  # too few runs
        (200, CpuBudget(cpus=1, quota=None, load=1.0), 1),  # affinity: one CPU
        (200, CpuBudget(cpus=8, quota=1.5, load=1.0), 1),  # a quota of 1.5 CPUs
        (200, CpuBudget(cpus=8, quota=4.0, load=1.0), 4),  # a quota of 4 of 8 CPUs
        (200, CpuBudget(cpus=8, quota=None, load=4.0), 5),  # 8 CPUs, 3 busy: 5 free
        (200, CpuBudget(cpus=64, quota=None, load=1.0), 64),
    ],
)
def test_pool_size(runs, budget, expected):
    assert pool_size(runs, budget) == expected


def test_pool_size_respects_its_cap():
    assert pool_size(10_000, CpuBudget(cpus=64, quota=None, load=0.0), cap=3) == 3


def _files(tmp_path: Path, membership: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(exist_ok=True)
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(membership)
    return root, proc


def test_cgroup_v2_quota_of_the_group_or_a_parent(tmp_path):
    root, proc = _files(
        tmp_path,
        "0::/user.slice/job\n",
        {"user.slice/job/cpu.max": "max 100000\n", "user.slice/cpu.max": "150000 100000\n"},
    )
    assert cgroup_quota(root, proc) == pytest.approx(1.5)
    root, proc = _files(tmp_path / "b", "0::/\n", {"cpu.max": "max 100000\n"})
    assert cgroup_quota(root, proc) is None


def test_cgroup_v1_quota(tmp_path):
    membership = "4:memory:/x\n2:cpu,cpuacct:/docker/abc\n0::/\n"
    root, proc = _files(
        tmp_path,
        membership,
        {
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        },
    )
    assert cgroup_quota(root, proc) == pytest.approx(0.5)
    root, proc = _files(
        tmp_path / "none",
        "1:cpu:/\n",
        {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_quota(root, proc) is None
    assert cgroup_quota(tmp_path / "missing", tmp_path / "missing_file") is None


def test_load_is_the_runnable_count_of_the_kernel(tmp_path):
    f = tmp_path / "loadavg"
    f.write_text("9.40 8.51 8.64 5/283 1798\n")
    assert current_load(f, samples=3, interval_s=0) == 5.0  # runnable now, not the 1-min 9.40
    f.write_text("garbage")
    assert current_load(f, samples=1) >= 0.0  # falls back to os.getloadavg


def test_budget_reads_this_machine():
    b = cpus.cpu_budget()
    assert b.cpus >= 1 and b.load >= 0 and (b.quota is None or b.quota > 0)
    assert 1 <= pool_size(1000, b) <= b.cpus
