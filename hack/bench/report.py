#!/usr/bin/env python3
"""The report of hack/bench/e2e.sh: tables and ratios (Markdown, on stdout) and the plot of
database-operator's throughput against its worker count (a hand-written SVG, no plotting
library needed), from the results.tsv the script writes.

usage: hack/bench/report.py results.tsv [--workers 2] [--svg docs/reconcile-throughput.svg]
"""
import argparse
import csv
import math
import os
import platform
import statistics

OURS = "database-operator"
# The binary the image ships (static, debug info stripped), measured beside OPERATOR's
# (target/release's unless the run named another).
SHIPPED = "database-operator-image"
# The operator with --priority-queue=false: client-go's one FIFO instead of the priority lane.
FIFO = "database-operator-fifo"
# Peers that do exactly our work (same objects, same status, same events).
EQUAL_PEERS = ["controller-runtime", "kube-runtime"]
PEERS = ["sample-controller"] + EQUAL_PEERS
BARE = ["bare-writer-events", "bare-writer"]


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return f"{os.cpu_count()} cores ({model}), {mem / 1024 / 1024:.1f} GiB, Linux {platform.release()}"


PLANE = ("apiserver_cpu_seconds", "etcd_cpu_seconds", "kcm_cpu_seconds")


def plane_cpu(r):
    """'apiserver / etcd / kcm' CPU-seconds during the measurement, when the run recorded them."""
    values = [r.get(k) for k in PLANE]
    if any(v in (None, "", "None") for v in values):
        return "-"
    return " / ".join(f"{float(v):.0f}" for v in values)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--svg")
    args = parser.parse_args()
    rows = list(csv.DictReader(open(args.results), delimiter="\t"))
    for r in rows:
        for k in ("workers", "n"):
            r[k] = int(r[k])
        for k in ("seconds", "per_second", "cpu_seconds", "rss_mib"):
            r[k] = float(r[k])
        for k in ("idle_seconds", "converged_cpu_seconds", "writes", "writes_after_convergence"):
            r[k] = float(r[k]) if r.get(k) not in (None, "", "None") else None
        r["idle_per_second"] = r["n"] / r["idle_seconds"] if r["idle_seconds"] else None
        r["plane"] = plane_cpu(r)
    # Repeated runs of one implementation at one worker count: every run in the tables, their
    # median (and range) in the ratios and the plot.
    at = {name: summary([r for r in rows if r["implementation"] == name and r["workers"] == args.workers])
          for name in {r["implementation"] for r in rows}}
    at = {k: v for k, v in at.items() if v}
    ours = at.get(OURS)
    # The headline is the time until idle (all the work done) where the runs measured it.
    until_idle = bool(ours and ours.get("idle_per_second"))
    speed = "idle_per_second" if until_idle else "per_second"

    limit = next((r.get("cpu_limit") for r in rows if r.get("cpu_limit")), None)
    print(f"Machine: {machine()}.\n")
    if limit:
        print(f"Every implementation ran under a CPU limit of **{limit}** (a CFS quota, as a pod's "
              f"`resources.limits.cpu`); the control plane ran unlimited.\n")
    unrelated = next((r.get("unrelated") for r in rows if r.get("unrelated") not in (None, "", "0")), None)
    if unrelated:
        print(f"Before each measurement, **{unrelated}** Deployments of nobody's (0 replicas, none of "
              f"the operator's labels) were created in a namespace of their own.\n")
    print(f"### N parents to convergence and to idle at workers = {args.workers}"
          f"{f', CPU limit {limit}' if limit else ''}\n")
    print("Idle: none of the implementation's writes seen for the quiet window after convergence "
          "(`e2e-probe run --quiet-secs`); CPU-s and peak RSS are at the end of it, CPU-s at "
          "convergence apart. A median row gives each figure's median and, in brackets, its range.\n")
    header = ("| implementation | workers | N | seconds to converge | seconds to idle | Databases/s until idle "
              "| CPU-s until idle | CPU-s at convergence | writes after convergence | peak RSS MiB "
              "| apiserver / etcd / kcm CPU-s | load (1/5/15 min) |")
    print(header)
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    for name in [OURS, FIFO, SHIPPED] + PEERS + BARE:
        for r in (r for r in rows if r["implementation"] == name and r["workers"] == args.workers):
            print(f"| {name} | {r['workers']} | {r['n']} | {fmt(r, 'seconds', 1)} | {fmt(r, 'idle_seconds', 1)} | "
                  f"{fmt(r, 'idle_per_second', 1)} | {fmt(r, 'cpu_seconds', 2)} | {fmt(r, 'converged_cpu_seconds', 2)} | "
                  f"{fmt(r, 'writes_after_convergence', 0)} | {fmt(r, 'rss_mib', 1)} | {r['plane']} | {r['load']} |")
        r = at.get(name)
        if r and r["runs"] > 1:
            print(f"| **{name}, median of {r['runs']}** | {r['workers']} | {r['n']} | {fmt(r, 'seconds', 1)} | "
                  f"{fmt(r, 'idle_seconds', 1)} | {fmt(r, 'idle_per_second', 1)} | {fmt(r, 'cpu_seconds', 2)} | "
                  f"{fmt(r, 'converged_cpu_seconds', 2)} | {fmt(r, 'writes_after_convergence', 0)} | "
                  f"{fmt(r, 'rss_mib', 1)} | | |")
    print("\nCommands (run by the probe, `e2e-probe run ... -- COMMAND`):\n")
    for name in [OURS, FIFO, SHIPPED] + PEERS + BARE:
        if name in at:
            print(f"- {name}: `{at[name]['command']}`")

    if ours:
        print("\n### Ratios (targets in brackets; measured, not asserted)\n")
        equal = [at[p] for p in EQUAL_PEERS if p in at]
        every = [at[p] for p in PEERS if p in at]
        for title, peers in (("the peers doing the same work (controller-runtime, kube-runtime)", equal),
                             ("all peers, sample-controller included (it does less work per object)", every)):
            if not peers:
                continue
            fastest = max(peers, key=lambda r: r[speed] or 0)
            leanest_cpu = min(peers, key=lambda r: r["cpu_seconds"])
            leanest_rss = min(peers, key=lambda r: r["rss_mib"])
            print(f"Against the best of {title}{', until idle' if until_idle else ''}:\n")
            print(f"- throughput, ours / best peer ({fastest['implementation']}): "
                  f"**{ours[speed] / fastest[speed]:.2f}x** [>= 1.5x]")
            print(f"- CPU-seconds, best peer ({leanest_cpu['implementation']}) / ours: "
                  f"**{leanest_cpu['cpu_seconds'] / ours['cpu_seconds']:.2f}x** [>= 2x, i.e. ours <= half]")
            print(f"- peak RSS, best peer ({leanest_rss['implementation']}) / ours: "
                  f"**{leanest_rss['rss_mib'] / ours['rss_mib']:.2f}x** [>= 2x, i.e. ours <= half]\n")
        if limit:
            print(f"Under the CPU limit of {limit}, throughput against each peer doing the same work:\n")
            for peer, target in (("kube-runtime", 2.5), ("controller-runtime", 6.0)):
                if peer in at and at[peer][speed]:
                    ratio = ours[speed] / at[peer][speed]
                    print(f"- ours / {peer}: **{ratio:.2f}x** [>= {target}x: {'met' if ratio >= target else 'not met'}]")
            print()
        if SHIPPED in at:
            shipped = at[SHIPPED]
            print(f"The shipped binary (the image's) / `{ours['command'].split()[0]}`'s: throughput "
                  f"**{shipped['per_second'] / ours['per_second']:.2f}x**, CPU-s "
                  f"**{shipped['cpu_seconds'] / ours['cpu_seconds']:.2f}x**, peak RSS "
                  f"**{shipped['rss_mib'] / ours['rss_mib']:.2f}x** [throughput >= 1, CPU-s and RSS "
                  f"within the run-to-run spread]\n")
        for bare in BARE:
            if bare in at and at[bare][speed]:
                what = "the same writes, events included" if bare.endswith("events") else "the three applies only"
                print(f"- throughput, ours / {bare} ({what}): "
                      f"**{ours[speed] / at[bare][speed]:.2f}** [>= 0.9]; CPU per Database, ours / {bare}: "
                      f"**{ours['cpu_seconds'] / at[bare]['cpu_seconds']:.2f}x** [<= 1.3x]")

    sweep_runs = sorted((r for r in rows if r["implementation"] == OURS), key=lambda r: r["workers"])
    sweep = [summary([r for r in sweep_runs if r["workers"] == w]) for w in sorted({r["workers"] for r in sweep_runs})]
    if sweep_runs:
        print("\n### database-operator: worker sweep\n")
        print("| workers | N | seconds | reconciles/s | CPU-s | peak RSS MiB | apiserver / etcd / kcm CPU-s "
              "| load (1/5/15 min) |")
        print("|--:|--:|--:|--:|--:|--:|--:|---|")
        for r in sweep_runs:
            print(f"| {r['workers']} | {r['n']} | {r['seconds']:.1f} | {r['per_second']:.1f} | "
                  f"{r['cpu_seconds']:.2f} | {r['rss_mib']:.1f} | {r['plane']} | {r['load']} |")
    if args.svg and sweep:
        others = [at[p] for p in PEERS + BARE if p in at]
        with open(args.svg, "w") as f:
            f.write(svg(sweep, others, args.workers))


def svg(sweep, others, workers):
    """database-operator's reconciles/s against workers (log2 x axis), with the peers and the
    bare writer as marked points at their worker count."""
    width, height, left, right, top, bottom = 720, 420, 70, 220, 40, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [r["workers"] for r in sweep] + [r["workers"] for r in others]
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    hi = hi if hi > lo else lo + 1
    y_max = max(r["per_second"] for r in sweep + others)
    step = nice_step(y_max / 5)
    y_top = step * math.ceil(y_max / step)

    def x(w):
        return left + (math.log2(w) - lo) / (hi - lo) * plot_w

    def y(v):
        return top + plot_h - v / y_top * plot_h

    n = sweep[0]["n"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15" font-weight="bold">Reconcile throughput to convergence '
           f'(N = {n}, real control plane)</text>']
    for i in range(int(round(y_top / step)) + 1):
        v = i * step
        out.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + plot_w}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for w in sorted(set(xs)):
        out.append(f'<line x1="{x(w):.1f}" y1="{top + plot_h}" x2="{x(w):.1f}" y2="{top + plot_h + 5}" stroke="black"/>')
        out.append(f'<text x="{x(w):.1f}" y="{top + plot_h + 20}" text-anchor="middle">{w}</text>')
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 18}" text-anchor="middle">workers (concurrent reconciles)</text>')
    out.append(f'<text transform="translate(18 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
               f'reconciles / s (N / seconds to converge)</text>')
    # Separate segments rather than one open path: some SVG renderers (ImageMagick's) close an
    # unfilled path.
    for a, b in zip(sweep, sweep[1:]):
        out.append(f'<line x1="{x(a["workers"]):.1f}" y1="{y(a["per_second"]):.1f}" x2="{x(b["workers"]):.1f}" '
                   f'y2="{y(b["per_second"]):.1f}" stroke="#1f77b4" stroke-width="2.5"/>')
    for r in sweep:
        out.append(f'<circle cx="{x(r["workers"]):.1f}" cy="{y(r["per_second"]):.1f}" r="4" fill="#1f77b4"/>')
        out.append(f'<text x="{x(r["workers"]):.1f}" y="{y(r["per_second"]) - 9:.1f}" text-anchor="middle" '
                   f'fill="#1f77b4">{r["per_second"]:.0f}</text>')
    colors = {"sample-controller": "#7f7f7f", "controller-runtime": "#d62728", "kube-runtime": "#ff7f0e",
              "bare-writer": "#2ca02c", "bare-writer-events": "#17becf"}
    shapes = {"bare-writer": "square", "bare-writer-events": "square"}
    legend_y = top + 10
    legend_x = left + plot_w + 20
    out.append(f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 20}" y2="{legend_y}" stroke="#1f77b4" stroke-width="2.5"/>')
    out.append(f'<text x="{legend_x + 26}" y="{legend_y + 4}">database-operator</text>')
    for i, r in enumerate(others):
        name, c = r["implementation"], colors.get(r["implementation"], "black")
        cx, cy = x(r["workers"]) + (i - len(others) / 2) * 7, y(r["per_second"])
        if shapes.get(name) == "square":
            out.append(f'<rect x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8" fill="{c}"/>')
        else:
            out.append(f'<path d="M {cx:.1f} {cy - 5:.1f} L {cx + 5:.1f} {cy + 4:.1f} L {cx - 5:.1f} {cy + 4:.1f} Z" fill="{c}"/>')
        ly = legend_y + 22 * (i + 1)
        out.append(f'<rect x="{legend_x + 6}" y="{ly - 4}" width="8" height="8" fill="{c}"/>')
        out.append(f'<text x="{legend_x + 26}" y="{ly + 4}">{name}: {r["per_second"]:.0f}/s</text>')
    note_y = legend_y + 22 * (len(others) + 1) + 10
    out.append(f'<text x="{legend_x}" y="{note_y}" fill="#555">peers at workers = {workers};</text>')
    out.append(f'<text x="{legend_x}" y="{note_y + 16}" fill="#555">repeated runs: their median</text>')
    out.append("</svg>\n")
    return "\n".join(out)


FIGURES = ("seconds", "per_second", "cpu_seconds", "rss_mib", "idle_seconds", "idle_per_second",
           "converged_cpu_seconds", "writes_after_convergence")


def summary(runs):
    """One row standing for `runs`: each figure's median, and its range as (lowest, highest)
    under the figure's name with `_range`; None for no runs."""
    if not runs:
        return None
    row = dict(runs[-1])
    for k in FIGURES:
        values = [r[k] for r in runs if r.get(k) is not None]
        row[k] = statistics.median(values) if values else None
        row[k + "_range"] = (min(values), max(values)) if len(values) > 1 else None
    row["runs"] = len(runs)
    return row


def fmt(row, k, digits):
    """A figure of `row` with `digits` decimals, its range in brackets when it has one."""
    value = row.get(k)
    if value is None:
        return "-"
    spread = row.get(k + "_range")
    text = f"{value:.{digits}f}"
    return f"{text} ({spread[0]:.{digits}f}-{spread[1]:.{digits}f})" if spread else text


def nice_step(raw):
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


if __name__ == "__main__":
    main()
