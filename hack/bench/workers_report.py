#!/usr/bin/env python3
"""The report of hack/bench/workers.sh: for each implementation a table of reconciles/s,
workers down and added round trips across (Markdown, on stdout), and a plot of reconciles/s
against workers, one line per round trip and implementation (a hand-written SVG).

usage: hack/bench/workers_report.py results.tsv [--svg docs/workers-latency.svg]
"""
import argparse
import csv
import math

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--svg")
    args = parser.parse_args()
    rows = list(csv.DictReader(open(args.results), delimiter="\t"))
    if not rows:
        print("no runs")
        return
    impls = list(dict.fromkeys(r["implementation"] for r in rows))
    rtts = sorted({int(r["rtt_ms"]) for r in rows})
    workers = sorted({int(r["workers"]) for r in rows})
    value = {(r["implementation"], int(r["rtt_ms"]), int(r["workers"])): float(r["per_second"]) for r in rows}
    limit = rows[0].get("cpu_limit") or "none"
    print(f"N = {rows[0]['n']}, CPU limit {limit}: reconciles/s")
    for impl in impls:
        print(f"\n{impl}\n")
        print("| workers | " + " | ".join(f"+{rtt} ms" for rtt in rtts) + " |")
        print("|--:|" + "--:|" * len(rtts))
        for w in workers:
            cells = [f"{value[(impl, rtt, w)]:.1f}" if (impl, rtt, w) in value else "-" for rtt in rtts]
            print(f"| {w} | " + " | ".join(cells) + " |")
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(value, impls, rtts, workers, limit, rows[0]["n"]))


def svg(value, impls, rtts, workers, limit, n):
    width, height, left, right, top, bottom = 720, 420, 60, 200, 40, 50
    top_value = max(value.values()) * 1.1
    xs = {w: i for i, w in enumerate(workers)}

    def x(w):
        return left + (width - left - right) * xs[w] / max(1, len(workers) - 1)

    def y(v):
        return height - bottom - (height - top - bottom) * v / top_value

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20">Reconciles/s against workers, N = {n}, CPU limit {limit}, one line per added round trip</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>']
    for w in workers:
        out.append(f'<text x="{x(w)}" y="{height - bottom + 18}" text-anchor="middle">{w}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">workers</text>')
    step = 10 ** math.floor(math.log10(top_value / 2)) if top_value > 0 else 1
    tick = 0.0
    while tick <= top_value:
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4}" text-anchor="end">{tick:g}</text>')
        tick += step
    legend = 0
    for i, impl in enumerate(impls):
        dash = "" if i == 0 else ' stroke-dasharray="6,4"'
        for j, rtt in enumerate(rtts):
            points = [(x(w), y(value[(impl, rtt, w)])) for w in workers if (impl, rtt, w) in value]
            if not points:
                continue
            colour = COLOURS[j % len(COLOURS)]
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>')
            ly = top + 18 * legend
            out.append(f'<line x1="{width - right + 10}" y1="{ly}" x2="{width - right + 40}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
            out.append(f'<text x="{width - right + 46}" y="{ly + 4}">{impl} +{rtt} ms</text>')
            legend += 1
    out.append("</svg>\n")
    return "\n".join(out)


if __name__ == "__main__":
    main()
