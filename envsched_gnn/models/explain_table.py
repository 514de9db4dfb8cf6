"""A readable text rendering of the evidence of :func:`.evidence.explain_task`."""

from __future__ import annotations

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.config import Y_NAMES


def _vmd(values: dict[str, float] | None) -> str:
    if values is None:
        return "undefined (never observed)"
    return "  ".join(f"{name}={values[name]:.4f}" for name in Y_NAMES)


def _half_life_lines(label: str, part: dict) -> list[str]:
    lines = [
        f"half-life {part['half_life']:g} ({label}): global reference g: {_vmd(part['g'])}",
    ]
    for relation in RELATIONS:
        rel = part["relations"][relation]
        lines.append(
            f"  {relation} (fusion weight {rel['weight']:g}): G {_vmd(rel['G'])}; "
            f"share of g {rel['global_share']:.4f}; {len(rel['neighbours'])} observed neighbours"
        )
        if rel["neighbours"]:
            lines.append(
                f"    {'neighbour':<24} {'env':<16} {'sim':>6} {'W':>7} "
                f"{'y_v':>7} {'y_m':>7} {'y_d':>7} {'share':>7}"
            )
        for n in rel["neighbours"]:
            lines.append(
                f"    {n['task_id']:<24} {str(n['env']):<16} {n['sim']:6.3f} {n['W']:7.3f} "
                f"{n['y_v']:7.4f} {n['y_m']:7.4f} {n['y_d']:7.4f} {n['share']:7.4f}"
            )
    lines += [
        f"  graph prior P: {_vmd(part['prior'])}",
        f"  own history: W={part['own_W']:.4f}, ybar {_vmd(part['own_ybar'])}; "
        f"shrinkage share {part['shrink_share']:.4f} (prior share {part['prior_share']:.4f})",
        f"  E: {_vmd(part['E'])}; f = E_d E_m (1 - E_m) = {part['f']:.4f}",
        f"  pr(E_v)={part['pr_E_v']:.4f}  pr(f)={part['pr_f']:.4f}  "
        f"level={part['percentile']:.4f}  u_h = Q_v(level) = {part['u']:.4f}",
    ]
    return lines


def render(evidence: dict) -> str:
    """The evidence as lines of text: headline, each half-life, then the task's own observations."""
    e = evidence
    lines = [
        f"task {e['task_id']} (env {e['env']}) at step {e['step']}: q={e['q']:.4f} "
        f"(rank {e['rank']:g} of {e['num_tasks']}), u={e['u']:.4f} "
        f"[u_long={e['u_long']:.4f}, u_short={e['u_short']:.4f}]",
        f"E_v={e['E_v']:.4f}  E_m={e['E_m']:.4f}  E_d={e['E_d']:.4f}  f={e['f']:.4f}  "
        f"G_within={e['G_within']:.4f}  G_cross={e['G_cross']:.4f}  prior={e['prior']:.4f}",
    ]
    lines += _half_life_lines("long", e["half_lives"]["long"])
    lines += _half_life_lines("short", e["half_lives"]["short"])
    lines.append(f"own observations before step {e['step']}: {len(e['own_history'])}")
    if e["own_history"]:
        lines.append(f"  {'step':>6} {'v':>7} {'m':>7} {'d':>7} {'w_long':>7} {'w_short':>7}")
    for row in e["own_history"]:
        lines.append(
            f"  {row['step']:6d} {row['v']:7.4f} {row['m']:7.4f} {row['d']:7.4f} "
            f"{row['w_long']:7.4f} {row['w_short']:7.4f}"
        )
    return "\n".join(lines)
