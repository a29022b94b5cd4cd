#!/usr/bin/env python3
"""peer_report.py RESULTS_DIR — the table and plot of bench/peer.sh's rounds.

Reads RESULTS_DIR/round*/lilac*.json (`lilac bench --json`) and llama*.json
(`llama-bench -o json`), takes the median over the rounds of each engine's
tokens/s at each prompt length (prefill) and context length (decode), and
writes RESULTS_DIR/peer.md (environment, the table with lilac/llama.cpp
ratios, every round's numbers), peer.json, and peer.png (log-scale x; with
matplotlib, else gnuplot; else peer.gp + peer.dat are left for later).
Standard library only.
"""
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    rounds = sorted(glob.glob(os.path.join(root, "round*")))
    if not rounds:
        sys.exit(f"peer_report: no round* directories under {root}")
    # runs[(engine, phase, length)] = [tokens/s per round]
    runs = {}
    env = {"lilac": None, "llama": None}

    def add(engine, phase, length, tps):
        runs.setdefault((engine, phase, int(length)), []).append(float(tps))

    for rd in rounds:
        for p in sorted(glob.glob(os.path.join(rd, "lilac*.json"))):
            d = load(p)
            env["lilac"] = env["lilac"] or {"commit": d["lilac"]["commit"], "device": d["device"], "date": d["date"]}
            for r in d["prefill"]["results"]:
                add("lilac", "prefill", r["tokens"], r["tokens_per_s"]["median"])
            for r in d["decode"]["results"]:
                add("lilac", "decode", r["context"], r["tokens_per_s"]["median"])
        for p in sorted(glob.glob(os.path.join(rd, "llama*.json"))):
            for r in load(p):
                env["llama"] = env["llama"] or {k: r.get(k) for k in ("build_commit", "build_number", "gpu_info", "backends",
                                                                      "model_type", "n_batch", "n_ubatch", "flash_attn",
                                                                      "type_k", "type_v", "n_gpu_layers")}
                if r.get("n_gen", 0) == 0 and r.get("n_prompt", 0) > 0:
                    add("llama", "prefill", r["n_prompt"], r["avg_ts"])
                elif r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
                    add("llama", "decode", r.get("n_depth", 0), r["avg_ts"])
    lengths = sorted({k[2] for k in runs})
    table = []
    for phase in ("prefill", "decode"):
        for L in lengths:
            a, b = runs.get(("lilac", phase, L)), runs.get(("llama", phase, L))
            if not a and not b:
                continue
            ma = statistics.median(a) if a else None
            mb = statistics.median(b) if b else None
            table.append({"phase": phase, "length": L, "lilac": ma, "llama": mb, "ratio": ma / mb if ma and mb else None,
                          "lilac_runs": a or [], "llama_runs": b or []})
    out = {"rounds": len(rounds), "env": env, "table": table}
    with open(os.path.join(root, "peer.json"), "w") as f:
        json.dump(out, f, indent=1)

    def fmt(x, nd=1):
        return "–" if x is None else f"{x:,.{nd}f}"

    lines = ["# lilac vs llama.cpp", ""]
    le, ll = env["lilac"] or {}, env["llama"] or {}
    build = f"build {ll.get('build_commit', '?')} ({ll.get('build_number', '?')})"
    # a prebuilt llama.cpp (bench/peer.sh buildhere) has no git metadata: llama-bench says
    # "unknown"; its BUILDINFO (beside the results, in the build step's directory) says what it is
    info = os.path.join(root, "..", "llama-build", "BUILDINFO")
    if ll.get("build_commit") in (None, "unknown") and os.path.exists(info):
        with open(info) as f:
            build = f.readline().strip().split(", this run's")[0] + " (llama-bench reports build unknown: prebuilt without git metadata)"

    dev = le.get("device", {})
    lines += [f"- date: {le.get('date', '?')}; {len(rounds)} rounds, the median of the rounds per cell",
              f"- GPU: {dev.get('name', '?')}, driver {dev.get('driver', '?')}, SM clock {dev.get('sm_clock_mhz_start', '?')} MHz"
              f" at the start (max {dev.get('sm_clock_mhz_max', '?')})",
              f"- lilac: commit {le.get('commit', '?')}",
              f"- llama.cpp: {build}, backends {ll.get('backends', '?')},"
              f" flash_attn {ll.get('flash_attn', '?')}, n_gpu_layers {ll.get('n_gpu_layers', '?')},"
              f" batch {ll.get('n_batch', '?')}/{ll.get('n_ubatch', '?')}, K/V {ll.get('type_k', '?')}/{ll.get('type_v', '?')}", ""]
    for phase, unit in (("prefill", "prompt tokens"), ("decode", "context")):
        rows = [r for r in table if r["phase"] == phase]
        if not rows:
            continue
        lines += [f"## {phase} (tokens/s)", "", f"| {unit} | lilac | llama.cpp | lilac / llama.cpp |", "| ---: | ---: | ---: | ---: |"]
        for r in rows:
            lines.append(f"| {r['length']} | {fmt(r['lilac'])} | {fmt(r['llama'])} | {fmt(r['ratio'], 2)} |")
        ratios = [r["ratio"] for r in rows if r["ratio"]]
        if ratios:
            slower = [str(r["length"]) for r in rows if r["ratio"] and r["ratio"] < 1]
            lines += ["", f"Mean ratio over {len(ratios)} lengths: {statistics.mean(ratios):.2f}; lilac slower at: "
                      f"{', '.join(slower) if slower else 'none'}."]
        lines.append("")
    lines += ["## every round", "", "| phase | length | lilac runs | llama.cpp runs |", "| --- | ---: | --- | --- |"]
    for r in table:
        lines.append(f"| {r['phase']} | {r['length']} | {', '.join(fmt(x) for x in r['lilac_runs'])} | "
                     f"{', '.join(fmt(x) for x in r['llama_runs'])} |")
    with open(os.path.join(root, "peer.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    # the plot: prefill and decode tokens/s of both engines against length, log x
    dat = os.path.join(root, "peer.dat")
    with open(dat, "w") as f:
        for phase in ("prefill", "decode"):
            f.write(f"# {phase}: length lilac llama ratio\n")
            for r in (x for x in table if x["phase"] == phase):
                f.write(f"{r['length']} {r['lilac'] or 'NaN'} {r['llama'] or 'NaN'} {r['ratio'] or 'NaN'}\n")
            f.write("\n\n")
    png = os.path.join(root, "peer.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, phase in zip(axes, ("prefill", "decode")):
            rows = [r for r in table if r["phase"] == phase]
            xs = [r["length"] for r in rows]
            ax.plot(xs, [r["lilac"] for r in rows], "o-", label="lilac")
            ax.plot(xs, [r["llama"] for r in rows], "s-", label="llama.cpp")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("prompt tokens" if phase == "prefill" else "context tokens")
            ax.set_ylabel("tokens/s")
            ax.set_title(f"{phase} ({dev.get('name', 'GPU')})")
            for r in rows:
                if r["ratio"]:
                    ax.annotate(f"{r['ratio']:.2f}x", (r["length"], r["lilac"]), textcoords="offset points", xytext=(0, 6),
                                ha="center", fontsize=7)
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=120)
        print(f"plot: {png} (matplotlib)")
        return
    except ImportError:
        pass
    gp = os.path.join(root, "peer.gp")
    with open(gp, "w") as f:
        f.write(f"""set terminal pngcairo size 1400,520
set output '{png}'
set multiplot layout 1,2
set logscale x 2
set grid
set key top right
set xlabel 'prompt tokens'; set ylabel 'tokens/s'; set title 'prefill'
plot '{dat}' index 0 using 1:2 with linespoints title 'lilac', '' index 0 using 1:3 with linespoints title 'llama.cpp'
set xlabel 'context tokens'; set title 'decode'
plot '{dat}' index 1 using 1:2 with linespoints title 'lilac', '' index 1 using 1:3 with linespoints title 'llama.cpp'
unset multiplot
""")
    if shutil.which("gnuplot") and subprocess.run(["gnuplot", gp]).returncode == 0:
        print(f"plot: {png} (gnuplot)")
    else:
        print(f"plot: neither matplotlib nor gnuplot here; run 'gnuplot {gp}' where one is (data: {dat})")


if __name__ == "__main__":
    main()
