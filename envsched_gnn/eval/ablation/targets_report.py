"""The ablation report's compute to a target (:mod:`~envsched_gnn.eval.ablation.targets`):
rollouts to each share of random's lift, and every run paired against each reference."""

from __future__ import annotations

from collections.abc import Mapping

from envsched_gnn.eval.ablation.curves_report import markdown_table
from envsched_gnn.eval.ablation.targets import REFERENCES
from envsched_gnn.eval.stats import NOISE_MARK, format_ci


def render_targets(results: Mapping[str, dict], budget: int) -> str:
    """Two tables (each run; each run against each reference) and how to read them."""
    entries = {n: e["compute_to_target"] for n, e in results.items() if "compute_to_target" in e}
    if not entries:
        return ""
    lifted = next(iter(entries.values()))["targets"]
    fractions = list(lifted["targets"])
    head = ["scheduler", "groups rolled / trained", "updates"]
    head += [f"rollouts to {float(f):.0%} (reached; median; mean)" for f in fractions]
    head += ["rollout s to 75 %", "area (mean reward over the budget)"]
    rows = []
    for name, e in entries.items():
        cells = [format_ci(e["groups_per_trained"], 2), format_ci(e["updates"], 1)]
        for f in fractions:
            r = e["rollouts_to"][f]
            median = "-" if r["median"] is None else f"{r['median']:.0f}"
            mean = format_ci(r["mean_reached"], 0)
            cells.append(f"{r['reached']}/{r['seeds']}; {median}; {mean}")
        seconds = e["rollouts_to"].get("0.75", {}).get("rollout_s_reached")
        cells += [format_ci(seconds, 0), format_ci(e["area"], 4)]
        rows.append((name, cells))
    starts = sorted(set(lifted["start"].values()))
    start = f"{starts[0]:.4f}" if len(starts) == 1 else "each seed's own"
    lines = [
        f"Compute to a target. Start {start}; random's final lift {lifted['lift']:+.4f} (mean "
        "over seeds); the target of share f is start + f x lift (100 %: random's final, "
        "averaged over seeds). Rollouts to a target: where the run's curve through its "
        "evaluations (piecewise linear) first reaches it; reached on how many seeds, the "
        "median (a seed that never does counts beyond the budget) and the mean ± 95 % CI over "
        "the seeds that reached. Rollout s: the run's rollout time to 75 %. Area: the curve's "
        f"mean over the budget of {budget:,} rollouts.",
        "",
        *markdown_table(head, rows),
        "",
    ]
    for ref in [r for r in REFERENCES if any(r in e["versus"] for e in entries.values())]:
        head = ["scheduler"]
        head += [f"{float(f):.0%}: fewer x (pairs)" for f in fractions]
        head += ["area - ref", "at equal updates - ref", "groups / trained - ref"]
        rows = []
        for name, e in entries.items():
            versus = e["versus"].get(ref)
            if versus is None:
                continue
            cells = [_ratio(versus["rollouts_to"][f]) for f in fractions]
            cells += [
                format_ci(versus.get("area"), 4, sign=True, noise=True),
                format_ci(versus.get("at_equal_updates"), 4, sign=True, noise=True),
                format_ci(versus.get("groups_per_trained"), 2, sign=True, noise=True),
            ]
            rows.append((name, cells))
        lines += [
            f"Against {ref}, paired by seed. Fewer x: the reference's rollouts to the target "
            "over the run's, a geometric mean over the seeds where both reached, with its 95 % "
            "interval (above 1: the run needs fewer). At equal updates: both after the "
            f"smaller of their update counts.{NOISE_MARK}: the interval contains 0 (or 1).",
            "",
            *markdown_table(head, rows),
            "",
        ]
    return "\n".join(lines)


def _ratio(entry: Mapping) -> str:
    ratio = entry["ratio"]
    if ratio is None:
        return f"- ({entry['pairs']})"
    interval = ratio["interval"]
    if interval is None:
        return f"{ratio['mean']:.2f} ({entry['pairs']})"
    inside = NOISE_MARK if interval[0] <= 1.0 <= interval[1] else ""
    return f"{ratio['mean']:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]{inside} ({entry['pairs']})"
