#!/usr/bin/env python3
"""gguf_check.py — lilac's GGUF export checked by llama.cpp itself.

Builds tools/llama_logits.c against a llama.cpp build (CPU is enough), then on
the tiny fixture:
  1. the F32 export's teacher-forced logits from llama.cpp are within 2e-3 of
     tests/fixtures/tiny/golden.safetensors (Hugging Face transformers, fp32);
  2. every tensor of the Q4 export (Q4_1: the fixture is a real MLX
     quantisation), dequantised by ggml's own code, is bit-identical to the F32
     export's;
  3. the same for a `lilac synth --gguf-exact` model of the tiny config, whose
     Q4 export is all Q4_0.
The Q4 export's logits are reported, not asserted: llama.cpp quantises the
activations to 8 bits inside its 4-bit matmuls.

  python3 tools/gguf_check.py --llama-src DIR --llama-lib DIR [--lilac ./lilac]

--llama-src holds include/llama.h and ggml/include; --llama-lib holds
libllama.so and libggml*.so.  Exit 0 = all checks passed.  Standard library only.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from array import array

TOL = 2e-3


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        body = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        code = {"F32": "f", "I32": "i"}.get(v["dtype"])
        if code is None:
            continue
        arr = array(code)
        arr.frombytes(body[a:b])
        if sys.byteorder != "little":
            arr.byteswap()
        out[k] = (v["shape"], arr)
    return out


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}{r.stderr}")
        sys.exit(1)
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--llama-lib", required=True)
    ap.add_argument("--lilac", default="./lilac")
    ap.add_argument("--model", default="tests/fixtures/tiny")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lilac-gguf-check-")
    exe = os.path.join(tmp, "llama_logits")
    run(["cc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-I", os.path.join(a.llama_src, "include"),
         "-I", os.path.join(a.llama_src, "ggml", "include"), "tools/llama_logits.c", "-o", exe, "-L", a.llama_lib,
         "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + os.path.abspath(a.llama_lib)])
    f32 = os.path.join(tmp, "tiny-f32.gguf")
    q4 = os.path.join(tmp, "tiny-q4.gguf")
    run([a.lilac, "export-gguf", a.model, f32, "--f32", "-q"])
    run([a.lilac, "export-gguf", a.model, q4, "-q"])
    fails = 0

    g = read_safetensors(os.path.join(a.model, "golden.safetensors"))
    ids = list(g["prompt_ids"][1]) + list(g["generated_ids"][1])
    (T, V), gold = g["logits"]
    assert T == len(ids), (T, len(ids))
    results = {}
    for name, path in (("F32", f32), ("Q4", q4)):
        out = os.path.join(tmp, name + ".bin")
        n, vocab = map(int, run([exe, "logits", path, ",".join(map(str, ids)), out]).split())
        assert (n, vocab) == (T, V), (n, vocab, T, V)
        got = array("f")
        with open(out, "rb") as f:
            got.frombytes(f.read())
        worst, at = 0.0, 0
        top1 = 0
        for t in range(T):
            row_g = gold[t * V:(t + 1) * V]
            row = got[t * V:(t + 1) * V]
            for i in range(V):
                d = abs(row[i] - row_g[i])
                if d > worst:
                    worst, at = d, t
            top1 += max(range(V), key=row.__getitem__) == max(range(V), key=row_g.__getitem__)
        results[name] = (worst, at, top1)
        print(f"{name} export: llama.cpp logits vs the HF golden over {T} positions: max |diff| {worst:.3g} "
              f"(position {at}), top-1 agreement {top1}/{T}")
    if results["F32"][0] > TOL:
        print(f"FAIL: F32 export logits differ from the golden by {results['F32'][0]:.3g} > {TOL}")
        fails += 1
    else:
        print(f"ok   F32 export logits within {TOL} of the golden")

    print("Q4 (Q4_1) export vs F32 export, dequantised by ggml: " + run([exe, "dequant", q4, f32]).strip())
    print("ok   Q4_1 tensors bit-identical to the F32 export")

    exact = os.path.join(tmp, "exact")
    run([a.lilac, "synth", "--config", a.model, "--out", exact, "--gguf-exact", "-q"])
    ef32, eq4 = os.path.join(tmp, "exact-f32.gguf"), os.path.join(tmp, "exact-q4.gguf")
    run([a.lilac, "export-gguf", exact, ef32, "--f32", "-q"])
    err = subprocess.run([a.lilac, "export-gguf", exact, eq4], capture_output=True, text=True)
    if err.returncode != 0 or " 0 Q4_1" not in err.stderr:
        print(f"FAIL: the --gguf-exact export is not all Q4_0: {err.stderr.strip()}")
        fails += 1
    print("--gguf-exact Q4_0 export vs F32 export, dequantised by ggml: " + run([exe, "dequant", eq4, ef32]).strip())
    print("ok   Q4_0 tensors bit-identical to the F32 export")
    for p in (exe, f32, q4, ef32, eq4):
        os.remove(p)
    subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
