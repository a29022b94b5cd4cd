#!/usr/bin/env python3
"""consistency_report_test.py — tools/consistency_report.py on hand-made logits
whose perplexity, KL, top-1 agreement and max |dlogit| are known in closed
form; its refusals (wrong sizes, vocabulary mismatch, non-finite logits, ids
outside the vocabulary, a score JSON that disagrees with its file); and, with
LILAC set, two real `lilac score --logits-out` runs on the tiny fixture (chunk
512 vs chunk 7) through the score-JSON cross-check.  Run by consistency.sh.
Standard library only."""
import json
import math
import os
import subprocess
import sys
import tempfile
from array import array

TOOL = "tools/consistency_report.py"
fails = 0


def check(cond, what):
    global fails
    if cond:
        print(f"  ok   {what}")
    else:
        print(f"  FAIL {what}")
        fails += 1


def write_f32(path, rows):
    a = array("f", [x for r in rows for x in r])
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        a.tofile(f)


def setup(d, ids, engines, skipped=(), env=None):
    """engines: [(name, rows)], the reference first"""
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    with open(os.path.join(d, "runs.tsv"), "w") as f:
        for name, rows in engines:
            write_f32(os.path.join(d, name + ".f32"), rows)
            f.write(f"{name}\t{name}.f32\tengine {name}\t1.5\tcmd-{name} --x\n")
    with open(os.path.join(d, "skipped.tsv"), "w") as f:
        for name, why in skipped:
            f.write(f"{name}\t{why}\n")
    if env:
        with open(os.path.join(d, "env.txt"), "w") as f:
            for k, v in env.items():
                f.write(f"{k}: {v}\n")


def report(d):
    r = subprocess.run([sys.executable, TOOL, d], capture_output=True, text=True)
    res = None
    if r.returncode == 0:
        with open(os.path.join(d, "consistency.json")) as f:
            res = json.load(f)
    return r, res


def close(a, b, rel=1e-6, abs_=1e-9):
    return abs(a - b) <= max(abs_, rel * abs(b))


def known_values(tmp):
    # T = 3 positions, V = 4, ids [0, 1, 3]
    ln4, ln5 = math.log(4), math.log(5)
    ref = [[0, 0, 0, 0], [ln4, 0, 0, 0], [0, 1, 2, 3]]
    eng = [[0, 0, 0, ln5], [ln4 + 2.5, 2.5, 2.5, 2.5], [0, 1, 2, 3]]
    d = os.path.join(tmp, "known")
    os.mkdir(d)
    setup(d, [0, 1, 3], [("ref", ref), ("same", ref), ("eng", eng)], skipped=[("gpu", "no GPU here")],
          env={"date": "today", "machine": "test box"})
    r, res = report(d)
    check(r.returncode == 0, f"report on known values exits 0 ({r.stderr.strip()})")
    if not res:
        return
    e = {m["engine"]: m for m in res["engines"]}
    ref_m, same, m = e["ref"], e["same"], e["eng"]
    # ref: position 0 predicts id 1 with p 1/4, position 1 id 3 with p 1/7 -> ppl sqrt(28)
    check(close(ref_m["ppl"], math.sqrt(28)), f"reference perplexity sqrt(28) ({ref_m['ppl']})")
    # engine: p(1) = 1/8 at position 0, 1/7 at position 1 (a shifted row) -> ppl sqrt(56), +41.42%
    check(close(m["ppl"], math.sqrt(56)), f"engine perplexity sqrt(56) ({m['ppl']})")
    check(close(m["ppl_diff_pct"], 100 * (math.sqrt(2) - 1)), f"perplexity difference +41.421% ({m['ppl_diff_pct']})")
    # argmax: ref 0, 0, 3 (first maximum on the flat row); engine 3, 0, 3
    check(m["top1_agree"] == 2 and close(m["top1_agree_pct"], 200 / 3), f"top-1 agreement 2/3 ({m['top1_agree']})")
    # KL(uniform || (1,1,1,5)/8) = ln 2 - ln(5)/4 at position 0; 0 at the shifted and the equal row
    kl0 = math.log(2) - ln5 / 4
    check(close(m["kl_max"], kl0, rel=1e-5), f"max KL ln2 - ln5/4 = {kl0:.6f} ({m['kl_max']})")
    check(close(m["kl_mean"], kl0 / 3, rel=1e-5), f"mean KL (ln2 - ln5/4) / 3 ({m['kl_mean']})")
    check(abs(m["kl_median"]) < 1e-7, f"median KL 0 (two of three positions agree in distribution: {m['kl_median']})")
    check(close(m["max_abs_dlogit"], 2.5) and m["max_abs_dlogit_pos"] == 1,
          f"max |dlogit| 2.5 at position 1 ({m['max_abs_dlogit']} at {m['max_abs_dlogit_pos']})")
    # per-position max |dlogit|: ln 5, 2.5, 0 -> median ln 5, two positions more than 1 apart
    check(close(m["median_max_abs_dlogit"], ln5) and m["positions_over_1"] == 2,
          f"median per-position max |dlogit| ln 5, 2 positions > 1 ({m['median_max_abs_dlogit']}, {m['positions_over_1']})")
    pp = m["per_position"]
    check(pp["top1_agree"] == [0, 1, 1] and close(pp["kl"][0], kl0, rel=1e-5) and abs(pp["kl"][2]) < 1e-12,
          "per-position KL and top-1 agreement in the JSON")
    check(same["kl_mean"] == 0 and same["kl_max"] == 0 and same["max_abs_dlogit"] == 0 and same["ppl_diff_pct"] == 0
          and same["top1_agree"] == 3, "an identical engine: KL 0, max |dlogit| 0, ppl +0%, top-1 3/3")
    check(res["positions"] == 3 and res["reference"] == "ref" and m["vocab"] == 4 and m["seconds"] == 1.5,
          "JSON: positions, reference, vocabulary, time")
    with open(os.path.join(d, "consistency.md")) as f:
        md = f.read()
    check("| eng | engine eng | 7.48331 | +41.421% | 66.67% (2/3) |" in md, "markdown row of the engine")
    check("| gpu | not run: no GPU here |" in md, "markdown names the skipped engine and why")
    check("- machine: test box" in md and "cmd-eng --x" in md and "8 bits" in md,
          "markdown carries the environment, the commands and the activation note")


def refusals(tmp):
    row = [0.0, 1.0, 2.0, 3.0]
    cases = []

    def case(name, want, ids, engines, extra=None):
        d = os.path.join(tmp, name.replace(" ", "_"))
        os.mkdir(d)
        setup(d, ids, engines)
        if extra:
            extra(d)
        r, _ = report(d)
        cases.append((name, r, want))

    case("truncated file", "is not float32", [0, 1, 2], [("ref", [row] * 3), ("e", [row] * 3)],
         lambda d: open(os.path.join(d, "e.f32"), "r+b").truncate(40))
    case("vocabulary mismatch", "vocabulary 6", [0, 1, 2], [("ref", [row] * 3), ("e", [row + [0, 0]] * 3)])
    case("NaN logits", "non-finite", [0, 1], [("ref", [row, row]), ("e", [row, [0, math.nan, 0, 0]])])
    case("id outside the vocabulary", "outside the vocabulary", [0, 9], [("ref", [row] * 2)])
    case("one id", "at least 2", [0], [("ref", [row])])
    case("no runs", "no engines", [0, 1], [])
    case("score JSON disagrees", "ppl", [0, 1], [("ref", [row] * 2)],
         lambda d: json.dump({"tokens": 2, "nll": 0, "ppl": 1.0, "top1": [3, 3]}, open(os.path.join(d, "ref.json"), "w")))
    case("score JSON top-1 disagrees", "top-1", [0, 1], [("ref", [row] * 2)],
         lambda d: json.dump({"tokens": 2, "nll": 0, "ppl": 1.0, "top1": [3, 0]}, open(os.path.join(d, "ref.json"), "w")))
    for name, r, want in cases:
        err = r.stderr.strip()
        check(r.returncode == 1 and want in err and err.count("\n") == 0, f"refuses: {name} (exit {r.returncode}: {err})")


def tiny_score(tmp, lilac):
    d = os.path.join(tmp, "tiny")
    os.mkdir(d)
    ids = [(i * 37 + 11) % 512 for i in range(64)]
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write("\n".join(map(str, ids)) + "\n")
    with open(os.path.join(d, "runs.tsv"), "w") as runs:
        for name, chunk in (("cpu", []), ("chunk7", ["--chunk", "7"])):
            cmd = [lilac, "--backend", "cpu", "score", "--model", "tests/fixtures/tiny", "--ids", "@" + os.path.join(d, "ids.txt"),
                   "--logits-out", os.path.join(d, name + ".f32")] + chunk
            with open(os.path.join(d, name + ".json"), "w") as out:
                rc = subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL).returncode
            check(rc == 0, f"lilac score {' '.join(chunk) or '(one chunk)'} on the tiny fixture")
            runs.write(f"{name}\t{name}.f32\tlilac cpu {' '.join(chunk)}\t\t{' '.join(cmd)}\n")
    r, res = report(d)
    check(r.returncode == 0, f"report on lilac score's files passes the score-JSON cross-check ({r.stderr.strip()})")
    if res:
        m = res["engines"][1]
        s = res["engines"][0]
        check(s["score_json_ppl"] is not None and close(s["score_json_ppl"], s["ppl"], rel=1e-5),
              f"perplexity from the logits file = lilac score's ({s['ppl']:.6f})")
        check(m["top1_agree"] == 64 and m["max_abs_dlogit"] < 2e-3 and m["kl_mean"] < 1e-6,
              f"chunk 7 vs one chunk: top-1 64/64, max |dlogit| {m['max_abs_dlogit']:.3g}, mean KL {m['kl_mean']:.3g}")


def main():
    with tempfile.TemporaryDirectory(prefix="lilac-consist-") as tmp:
        known_values(tmp)
        refusals(tmp)
        lilac = os.environ.get("LILAC")
        if lilac and os.path.exists(lilac):
            tiny_score(tmp, lilac)
        else:
            print("  SKIP: the lilac score part (LILAC is not set to a binary)")
    if fails:
        print(f"{fails} check(s) failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
