"""The report of ``scripts/bench.py``: its Markdown tables and its plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import contention


def table(model: str, machine: str, report: dict[str, Any]) -> str:
    lines = [f"model `{model}` on {machine}; load average {report.get('load_before')} before the run", ""]
    for workload, data in report["workloads"].items():
        c = data["ceiling"]
        lines += [
            f"### {workload}",
            "",
            f"ceiling: {c['rps']:.1f} requests/s ({c['tokens_per_s']:.0f} tokens/s) at batch {c['batch']} and "
            f"{c['threads']} torch threads (by threads: "
            + ", ".join(f"{t}: {r:.1f}" for t, r in c["by_threads"].items())
            + f"); one forward at batch 1: {c['forward_ms_1']:.1f} ms",
            "",
            "| server | clients | req/s | questions/s | p50 ms | p95 ms | p99 ms | mean batch | baseline req/s "
            "| baseline p95 ms | server/ceiling | server/baseline |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        baseline = {r["clients"]: r for r in data.get("baseline", [])}
        for name, runs in data.get("servers", {}).items():
            for r in runs:
                b = baseline.get(r["clients"])
                mean_batch = f"{r['mean_batch']:.1f}" if r["mean_batch"] else "-"
                lines.append(
                    f"| {name} | {r['clients']} | {r['rps']:.1f} | {r['qps']:.1f} | {r['p50_ms']:.1f} | "
                    f"{r['p95_ms']:.1f} | {r['p99_ms']:.1f} | {mean_batch} | {b['rps'] if b else float('nan'):.1f} | "
                    f"{b['p95_ms'] if b else float('nan'):.1f} | {r['rps'] / c['rps']:.2f} | "
                    f"{(r['rps'] / b['rps']) if b and b['rps'] else float('nan'):.2f} |"
                )
        errors = sum(r["errors"] for runs in data.get("servers", {}).values() for r in runs)
        lines += ["", f"decisiond errors: {errors}", ""]
        if "contention" in data:
            lines.append(contention.table(data["contention"], workload))
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    workloads = list(report["workloads"])
    fig, axes = plt.subplots(2, len(workloads), figsize=(5 * len(workloads), 7), squeeze=False)
    for col, workload in enumerate(workloads):
        data = report["workloads"][workload]
        for name, runs in [*data.get("servers", {}).items(), ("baseline", data.get("baseline", []))]:
            if runs:
                x = [r["clients"] for r in runs]
                axes[0][col].plot(x, [r["rps"] for r in runs], marker="o", label=name)
                axes[1][col].plot(x, [r["p95_ms"] for r in runs], marker="o", label=name)
        axes[0][col].axhline(data["ceiling"]["rps"], linestyle="--", color="gray", label="ceiling")
        axes[0][col].set_title(f"{workload}: requests/s")
        axes[1][col].set_title(f"{workload}: p95 latency (ms)")
        for row in (0, 1):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_xlabel("concurrent clients")
            axes[row][col].legend()
    axes[1][0].set_yscale("log")
    fig.suptitle(f"decisiond bench: {report['model']} ({report['machine']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True
