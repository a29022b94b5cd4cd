#!/usr/bin/env python3
"""graph_trace.py — where a decode step's time goes inside the CUDA graph.

The bench's one-by-one profile launches each kernel alone, so it cannot show
what the graph does with programmatic dependent launch (a kernel's weights
stream while its predecessor drains).  This reads the kernel trace of a run
under `nsys profile --cuda-graph-trace=node` (the CSV of `nsys stats
--report cuda_gpu_trace --format csv`), cuts it into decode steps at each
launch of the step's first kernel (the embedding, `--step-start`), and
prints, per kernel (name and grid) over the last `--steps` complete steps:
launches per step, mean duration, the time per step, the mean gap from the
end of the kernel before it (negative: the two overlapped), and how far it
moves the step's end on ("adds": its end minus the latest end before it;
these sum to the step).  tools/cupti_trace.c writes the same columns where
nsys cannot.

    python3 tools/graph_trace.py trace_cuda_gpu_trace.csv [--steps 20] [--step-start embed]

Exit status 2 when the trace has no complete step (wrong file or regex).
Used by `bench/kernels/run_session.sh graph`."""
import argparse
import collections
import csv
import re
import subprocess
import sys


def short(name, grid=""):
    """The kernel's name without its parameter list and namespaces, cut at 56 characters, then its grid."""
    name = re.sub(r"<unnamed>::|\(anonymous namespace\)::", "", name)
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"^void |[A-Za-z_0-9]*::", "", name)
    return (name if len(name) <= 56 else name[:56] + "...") + (" [%s]" % grid if grid else "")


def demangle(names):
    """names demangled by c++filt where it is installed (CUPTI reports mangled names), else as given."""
    names = list(names)
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        got = out.split("\n")[:len(names)]
        return dict(zip(names, got)) if len(got) == len(names) else {n: n for n in names}
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def read_kernels(path):
    """(start ns, duration ns, name, grid) of every kernel in the trace, in start order; grid is "" or
    the grid's dimensions above 1 joined by "x" (a kernel on two grids is two kernels here)."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            name = r.get("Name") or ""
            if not name or name.startswith("[CUDA"):  # memcpy / memset rows
                continue
            try:
                grid = "x".join(r[k] for k in ("GrdX", "GrdY", "GrdZ") if r.get(k) not in (None, "", "1"))
                out.append((int(float(r["Start (ns)"])), int(float(r["Duration (ns)"])), name, grid))
            except (KeyError, ValueError):
                continue
    out.sort()
    names = demangle({n for _, _, n, _ in out if n.startswith("_Z")})
    return [(st, du, names.get(n, n), grid) for st, du, n, grid in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=20, help="complete steps to average (the last ones)")
    ap.add_argument("--step-start", default="embed", help="regex of the step's first kernel")
    a = ap.parse_args()
    ks = read_kernels(a.csv)
    first = re.compile(a.step_start)
    starts = [i for i, k in enumerate(ks) if first.search(k[2])]
    if len(starts) < 2:
        print("graph_trace: %s: fewer than two launches matching %r, so no complete step" % (a.csv, a.step_start),
              file=sys.stderr)
        return 2
    steps = [(starts[i], starts[i + 1]) for i in range(len(starts) - 1)][-a.steps:]
    n = len(steps)
    per = collections.OrderedDict()
    span = 0
    for lo, hi in steps:
        span += ks[hi][0] - ks[lo][0]
        prev_end = None
        for st, du, name, grid in ks[lo:hi]:
            e = per.setdefault(short(name, grid), [0, 0, 0, 0, 0])  # launches, duration, gap sum, gaps counted, adds
            e[0] += 1
            e[1] += du
            if prev_end is not None:
                e[2] += st - prev_end
                e[3] += 1
                e[4] += max(0, st + du - prev_end)
            prev_end = st + du if prev_end is None else max(prev_end, st + du)
    kernels = sum(e[0] for e in per.values()) / n
    print("%d steps of %.0f kernels: %.3f ms per step (start of one step's first kernel to the next's)"
          % (n, kernels, span / n / 1e6))
    print("%-66s %6s %8s %8s %10s %9s %9s" % ("kernel [grid]", "n/step", "us each", "us/step", "gap before",
                                              "adds each", "adds/step"))
    total = adds = 0.0
    for name, (c, du, gs, gn, ad) in sorted(per.items(), key=lambda x: -x[1][4]):
        total += du / n / 1e3
        adds += ad / n / 1e3
        gap = "%10.2f" % (gs / gn / 1e3) if gn else "%10s" % "-"
        print("%-66s %6.1f %8.2f %8.1f %s %9.2f %9.1f" % (name, c / n, du / c / 1e3, du / n / 1e3, gap, ad / c / 1e3,
                                                      ad / n / 1e3))
    print("sum of kernel durations: %.1f us per step (more than the step where kernels overlap)" % total)
    print("sum of adds: %.1f us per step (the step less its first kernel and the gap to the next step)" % adds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
