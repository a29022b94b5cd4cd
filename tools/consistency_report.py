#!/usr/bin/env python3
"""consistency_report.py DIR — the teacher-forced consistency report (issue 10).

Compares every engine's logits of the same token ids with the reference's
(lilac's fp32 CPU backend) and writes DIR/consistency.md (a markdown section
for docs/BENCHMARKS.md) and DIR/consistency.json.  bench/peer.sh's
`consistency` step fills DIR; any directory laid out the same way works:

  DIR/ids.txt      the token ids, whitespace-separated (T of them)
  DIR/runs.tsv     one engine a line, the reference first:
                   NAME <TAB> LOGITS-FILE <TAB> WHAT <TAB> SECONDS <TAB> COMMAND
                   (LOGITS-FILE relative to DIR: float32 little-endian [T, vocab],
                   as `lilac score --logits-out` and tools/llama_logits write it)
  DIR/skipped.tsv  optional: NAME <TAB> WHY, for engines that could not run
  DIR/env.txt      optional: "key: value" lines (date, machine, commit, versions)
  DIR/NAME.json    optional: `lilac score`'s stdout for that engine; its ppl and
                   top-1 ids are checked against the ones computed from the file

Per engine, against the reference, over the T positions (position t predicts
ids[t+1]; perplexity uses the T-1 positions that have a next id):
  perplexity exp(mean -log p(ids[t+1])), its difference from the reference's
  in %, top-1 agreement (argmax equal; the first maximum on ties), mean,
  median and max KL(ref || engine) in nats, max |logit difference| and its position, the
  median over positions of each position's max |logit difference| (robust to
  a few outlying positions), and how many positions differ by more than 1.
  The JSON also has every position's KL, max |dlogit| and top-1 agreement.

Exit 0 when the report is written; 1 (one line on stderr) on a malformed
directory, logits files of the wrong size, non-finite logits, or a score JSON
that disagrees with its logits file.  Standard library only: each row is
reduced with map() over array('f') and math.fsum: about 20 s per engine for
256 positions of a 248K vocabulary on one core of this development machine.
"""
import json
import math
import os
import statistics
import sys
from array import array
from itertools import repeat
from operator import mul, sub

NOTE = ("llama.cpp quantises the activations to 8 bits (q8_0 / q8_1 blocks of 32) inside its "
        "4-bit matrix products, on the CPU and on CUDA; lilac's CPU reference keeps them in fp32, and its "
        "CUDA backend splits them into 16-bit hi + lo planes (about fp32 accuracy) with K/V in bf16.  The "
        "weights are the same codes in every engine (the Q4_0 export of a `synth --gguf-exact` model; "
        "llama-cpu-f32, where it ran, is llama.cpp on the F32 export of the same weights, so without the "
        "8-bit activations).  Random-weight models amplify activation rounding (lilac's own CUDA prefill "
        "with bf16 activations alone, no lo plane, scored top-1 82.4% and mean KL 0.066 on a 4-layer "
        "real-width random model: docs/PERFORMANCE.md), so these figures are what was measured on random "
        "weights, not a prediction for the real checkpoint.  The perplexity is that of random ids under a "
        "random model: only its difference between engines means anything.")


class ReportError(Exception):
    pass


def read_ids(path):
    try:
        with open(path) as f:
            toks = f.read().split()
    except OSError as ex:
        raise ReportError(f"{path}: {ex.strerror}")
    ids = []
    for i, t in enumerate(toks):
        if not t.isdigit():
            raise ReportError(f"{path}: id {i} is {t!r}, not a non-negative integer")
        ids.append(int(t))
    if len(ids) < 2:
        raise ReportError(f"{path}: {len(ids)} ids; a teacher-forced comparison needs at least 2")
    return ids


def read_tsv(path, ncols, required):
    if not os.path.exists(path):
        if required:
            raise ReportError(f"{path}: missing")
        return []
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) != ncols:
                raise ReportError(f"{path}:{n}: {len(cols)} tab-separated fields, want {ncols}")
            rows.append(cols)
    if required and not rows:
        raise ReportError(f"{path}: no engines")
    return rows


def read_env(path):
    env = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition(": ")
                if sep:
                    env[k.strip()] = v.strip()
    return env


class Logits:
    """rows of a float32 [T, V] file, one at a time"""

    def __init__(self, path, T):
        try:
            size = os.path.getsize(path)
        except OSError as ex:
            raise ReportError(f"{path}: {ex.strerror}")
        if size == 0 or size % (4 * T):
            raise ReportError(f"{path}: {size} bytes is not float32 [{T}, vocab] for the {T} ids")
        self.path, self.V = path, size // (4 * T)
        self.f = open(path, "rb")

    def row(self, t):
        a = array("f")
        a.fromfile(self.f, self.V)
        if sys.byteorder != "little":
            a.byteswap()
        if not math.isfinite(sum(a)):  # NaN and inf propagate; max() would skip a NaN
            raise ReportError(f"{self.path}: position {t}: non-finite logits")
        return a, max(a)

    def close(self):
        self.f.close()


def logsumexp(a, m):
    return m + math.log(math.fsum(map(math.exp, map(sub, a, repeat(m)))))


def compare(d, ids, runs):
    """metrics of every engine in runs (the first is the reference)"""
    T = len(ids)
    files = [Logits(os.path.join(d, r[1]), T) for r in runs]
    V = files[0].V
    for fl in files[1:]:
        if fl.V != V:
            raise ReportError(f"{fl.path}: vocabulary {fl.V}, the reference {files[0].path} has {V}")
    bad = [i for i in ids if i >= V]
    if bad:
        raise ReportError(f"ids.txt: id {bad[0]} is outside the vocabulary of {V}")
    n = len(files)
    nll = [0.0] * n
    top1 = [[] for _ in range(n)]
    kl = [[] for _ in range(n)]  # per position
    dmax = [[] for _ in range(n)]  # per position: max over the vocabulary of |dlogit|
    for t in range(T):
        rows = [fl.row(t) for fl in files]
        lses = [logsumexp(a, m) for a, m in rows]
        for k, (a, m) in enumerate(rows):
            top1[k].append(a.index(m))
            if t + 1 < T:
                nll[k] += lses[k] - a[ids[t + 1]]
        r, lr = rows[0][0], lses[0]
        p = list(map(math.exp, map(sub, r, repeat(lr)))) if n > 1 else None  # the reference's probabilities
        for k in range(1, n):
            e, le = rows[k][0], lses[k]
            dr = list(map(sub, r, e))
            # KL(p||q) = sum p (log p - log q) = sum p (r - e) - (lse_r - lse_e)
            kl[k].append(math.fsum(map(mul, p, dr)) - (lr - le))
            dmax[k].append(max(map(abs, dr)))
    for fl in files:
        fl.close()
    out = []
    ppl_ref = math.exp(nll[0] / (T - 1))
    for k, run in enumerate(runs):
        ppl = math.exp(nll[k] / (T - 1))
        m = {"engine": run[0], "file": run[1], "what": run[2], "seconds": float(run[3]) if run[3] else None,
             "command": run[4], "positions": T, "vocab": V, "nll": nll[k] / (T - 1), "ppl": ppl, "top1": top1[k]}
        if k:
            agree = sum(1 for a, b in zip(top1[0], top1[k]) if a == b)
            worst = max(range(T), key=dmax[k].__getitem__)
            m.update({"ppl_diff_pct": 100.0 * (ppl / ppl_ref - 1.0), "top1_agree": agree,
                      "top1_agree_pct": 100.0 * agree / T, "kl_mean": math.fsum(kl[k]) / T, "kl_median": statistics.median(kl[k]), "kl_max": max(kl[k]),
                      "max_abs_dlogit": dmax[k][worst], "max_abs_dlogit_pos": worst,
                      "median_max_abs_dlogit": statistics.median(dmax[k]),
                      "positions_over_1": sum(1 for x in dmax[k] if x > 1.0),
                      "per_position": {"kl": kl[k], "max_abs_dlogit": dmax[k],
                                       "top1_agree": [int(a == b) for a, b in zip(top1[0], top1[k])]}})
        out.append(m)
    return out


def check_score_json(d, m):
    """the engine's `lilac score` JSON, when there is one, must agree with its logits file"""
    p = os.path.join(d, m["engine"] + ".json")
    if not os.path.exists(p):
        return None
    try:
        with open(p) as f:
            s = json.load(f)
    except (OSError, ValueError) as ex:
        raise ReportError(f"{p}: not lilac score's JSON ({ex})")
    if s.get("tokens") != m["positions"]:
        raise ReportError(f"{p}: {s.get('tokens')} tokens, the logits file has {m['positions']} positions")
    if s.get("top1") != m["top1"]:
        raise ReportError(f"{p}: its top-1 ids differ from the argmax of {m['file']}")
    if abs(s["ppl"] / m["ppl"] - 1.0) > 1e-5:
        raise ReportError(f"{p}: ppl {s['ppl']} but {m['file']} gives {m['ppl']:.6f}")
    return s["ppl"]


def g(x, nd=3):
    return "–" if x is None else f"{x:.{nd}g}"


def markdown(d, env, res, skipped):
    ref = res[0]
    T, V = ref["positions"], ref["vocab"]
    L = [f"### Consistency: teacher-forced logits over {T} positions", ""]
    for k, v in env.items():
        L.append(f"- {k}: {v}")
    L += [f"- vocabulary {V:,}; perplexity over the {T - 1} positions with a next id; reference: "
          f"**{ref['engine']}** ({ref['what']})", "",
          "| engine | what | perplexity | Δ perplexity vs ref | top-1 agreement | mean KL(ref ‖ engine) | median KL | max KL "
          "| max \\|Δlogit\\| (position) | median of the per-position max \\|Δlogit\\| | positions > 1 apart | time (s) |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in res:
        sec = "–" if m["seconds"] is None else f"{m['seconds']:.1f}"
        if m is ref:
            L.append(f"| {m['engine']} | {m['what']} | {m['ppl']:.6g} | (reference) | – | – | – | – | – | – | – | {sec} |")
        else:
            L.append(f"| {m['engine']} | {m['what']} | {m['ppl']:.6g} | {m['ppl_diff_pct']:+.3f}% | "
                     f"{m['top1_agree_pct']:.2f}% ({m['top1_agree']}/{T}) | {g(m['kl_mean'])} | {g(m['kl_median'])} | {g(m['kl_max'])} | "
                     f"{g(m['max_abs_dlogit'])} ({m['max_abs_dlogit_pos']}) | {g(m['median_max_abs_dlogit'])} | "
                     f"{m['positions_over_1']} | {sec} |")
    for name, why in skipped:
        L.append(f"| {name} | not run: {why} | | | | | | | | | | |")
    L += ["", f"Note: {NOTE}", "", "Commands:", "", "```sh"]
    for m in res:
        L.append(m["command"])
    L += ["```", ""]
    return "\n".join(L)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    d = argv[1]
    try:
        ids = read_ids(os.path.join(d, "ids.txt"))
        runs = read_tsv(os.path.join(d, "runs.tsv"), 5, True)
        skipped = read_tsv(os.path.join(d, "skipped.tsv"), 2, False)
        env = read_env(os.path.join(d, "env.txt"))
        res = compare(d, ids, runs)
        for m in res:
            m["score_json_ppl"] = check_score_json(d, m)
    except ReportError as ex:
        sys.stderr.write(f"consistency_report: {ex}\n")
        return 1
    md = markdown(d, env, res, skipped)
    with open(os.path.join(d, "consistency.md"), "w") as f:
        f.write(md)
    summary = {"env": env, "note": NOTE, "reference": res[0]["engine"], "positions": len(ids),
               "engines": [{k: v for k, v in m.items() if k != "top1"} for m in res],
               "skipped": [{"engine": n, "why": w} for n, w in skipped]}
    with open(os.path.join(d, "consistency.json"), "w") as f:
        json.dump(summary, f, indent=1)
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
