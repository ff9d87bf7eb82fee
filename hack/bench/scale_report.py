#!/usr/bin/env python3
"""The report of hack/bench/scale.sh: one table row per run (Markdown, on stdout) with the costs
per Database, and a plot of peak RSS and convergence time against N (a hand-written SVG, two
panels; the peers as single points).

usage: hack/bench/scale_report.py results.tsv [--svg docs/scale.svg]
"""
import argparse
import csv

# One colour per implementation, in the order the results name them (rows of several sittings
# can share one plot when their implementation column says which sitting they are from).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#d62728"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--svg")
    args = parser.parse_args()
    rows = list(csv.DictReader(open(args.results), delimiter="\t"))
    if not rows:
        print("no runs")
        return
    print("| implementation | N | converge s | idle after s | Databases/s | CPU-s until idle | CPU ms / Database | peak RSS MiB "
          "| KiB / Database | restart: idle after s | steady RSS MiB | relist peak MiB | relist / steady "
          "| after the restart: Database lists / watches; relists counted | created |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    smallest = {}
    for r in sorted(rows, key=lambda r: int(r["n"])):
        smallest.setdefault(r["implementation"], r)
    for r in rows:
        n, seconds, cpu, rss = int(r["n"]), float(r["converge_s"]), float(r["converge_cpu_s"]), float(r["converge_rss_mib"])
        base = smallest[r["implementation"]]
        # The memory each further Database costs, from the implementation's smallest run.
        if base is r:
            per = f"{rss * 1024 / n:.1f} (all)"
        else:
            per = f"{(rss - float(base['converge_rss_mib'])) * 1024 / (n - int(base['n'])):.1f}"
        steady, relist = float(r["steady_rss_mib"]), float(r["relist_rss_mib"])
        # Rows from before the harness recorded it have no idle time.
        idle = f"{float(r['idle_s']):.0f}" if r.get("idle_s") else "-"
        # Seeded before the start, or created at a fixed pace while it ran (hack/bench/scale.sh
        # PACE), with the arrivals' p99 from create to converged.
        pace = r.get("pace") or "-"
        created = "seeded" if pace == "-" else f"{pace}/s, p99 {float(r['arrival_p99_s']):.2f} s"
        print(f"| {r['implementation']} | {n:,} | {seconds:.0f} | {idle} | {n / seconds:.1f} | {cpu:.1f} | {cpu * 1000 / n:.2f} "
              f"| {rss:.1f} | {per} | {float(r['sync_s']):.2f} | {steady:.1f} | {relist:.1f} | {relist / steady:.2f}x "
              f"| {r['lists']} / {r['watches']}; {r['relists']} | {created} |")
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(rows))


def svg(rows):
    names = list(dict.fromkeys(r["implementation"] for r in rows))
    colours = dict(zip(names, PALETTE))
    width, height, panel_w, left, top, bottom = 1080, 380, 330, 70, 50, 50
    top_n = max(int(r["n"]) for r in rows) * 1.05
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20">Scale ladder (hack/bench/scale.sh): peak RSS and convergence time against N Databases</text>']
    for p, (key, title) in enumerate([("converge_rss_mib", "peak RSS, MiB"), ("converge_s", "convergence, s")]):
        x0 = left + p * (panel_w + 90)
        top_v = max(float(r[key]) for r in rows) * 1.1

        def x(n):
            return x0 + panel_w * n / top_n

        def y(v):
            return height - bottom - (height - top - bottom) * v / top_v

        out += [f'<text x="{x0}" y="{top - 12}">{title}</text>',
                f'<line x1="{x0}" y1="{height - bottom}" x2="{x0 + panel_w}" y2="{height - bottom}" stroke="black"/>',
                f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{height - bottom}" stroke="black"/>',
                f'<text x="{x0 + panel_w / 2}" y="{height - 12}" text-anchor="middle">Databases</text>']
        for n in sorted({int(r["n"]) for r in rows}):
            out.append(f'<text x="{x(n)}" y="{height - bottom + 16}" text-anchor="middle">{n // 1000}k</text>')
        for i in range(5):
            v = top_v * i / 4
            out.append(f'<text x="{x0 - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        for impl, colour in colours.items():
            points = sorted((int(r["n"]), float(r[key])) for r in rows if r["implementation"] == impl)
            if len(points) > 1:
                path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in points)
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
            out += [f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="4" fill="{colour}"/>' for n, v in points]
    legend_x = width - 220
    for i, (impl, colour) in enumerate(colours.items()):
        out += [f'<circle cx="{legend_x}" cy="{top + 18 * i}" r="4" fill="{colour}"/>',
                f'<text x="{legend_x + 10}" y="{top + 18 * i + 4}">{impl}</text>']
    out.append("</svg>\n")
    return "\n".join(out)


if __name__ == "__main__":
    main()
