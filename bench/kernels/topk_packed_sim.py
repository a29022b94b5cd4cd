#!/usr/bin/env python3
"""topk_packed_sim.py — the top-K rounds of moe_route.cuh on the host, bit
for bit on float32 keys: topk_sorted8's exact rounds (pick: a max of the
lanes' heads, then a min of the ids holding it) against pick_packed (tk9: one
max of keys with the id in the low byte, then a ninth round that must find
the high parts strictly decreasing, else the caller falls back to pick).
Wherever pick_packed says exact, its ids and values must be pick's.  It
checks the argument in moe_route.cuh's comment on many sets before a GPU
does (bench/kernels/topk_test variant 8 runs the device code).

    python3 bench/kernels/topk_packed_sim.py [sets]
"""
import math
import random
import struct
import sys


def f2u(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def u2f(u):
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def lanes_of(p):
    """each lane's (key, id) list, sorted as topk_sorted8::init sorts it"""
    lanes = []
    for lane in range(32):
        lst = [[f2u(p[e]) + 1 if p[e] >= 0 else 0, e] for e in range(lane, 256, 32)]
        lst.sort(key=lambda t: (-t[0], t[1]))
        lanes.append(lst)
    return lanes


def shift(lst):
    for i in range(7):
        lst[i] = list(lst[i + 1])
    lst[7] = [0, lst[7][1]]


def pick(p, k=8):
    lanes, ids, vals = lanes_of(p), [], []
    for _ in range(k):
        m = max(l[0][0] for l in lanes)
        wid = min(l[0][1] for l in lanes if l[0][0] == m)
        shift(lanes[wid % 32])
        ids.append(wid)
        vals.append(f2u(u2f(m - 1)))
    return ids, vals


def pick_packed(p, k=8):
    lanes, ids, vals = lanes_of(p), [], []
    prev, strict = 0, True
    for r in range(k + 1):
        keys = [(l[0][0] & ~255) | (255 - l[0][1]) for l in lanes]
        m = max(keys)
        if r > 0:
            strict = strict and (m >> 8) < prev
        prev = m >> 8
        if r == k:
            break
        wid = 255 - (m & 255)
        kw = lanes[wid % 32][0][0]
        for lane, key in enumerate(keys):
            if key == m:
                shift(lanes[lane])
        ids.append(wid)
        vals.append(f2u(u2f(kw - 1)))
    return strict, ids, vals


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sets(n, rng):
    """p = exp(l - max) as float32 for router-like logits, coarse ties, -inf, near ties"""
    for s in range(n):
        kind = s % 5
        lg = [rng.uniform(-2, 2) for _ in range(256)] if kind != 4 else [rng.gauss(0, 3) for _ in range(256)]
        if kind == 1:
            lg = [math.floor(v * 4) / 4 for v in lg]
        if kind == 2:
            for i in rng.sample(range(256), 40):
                lg[i] = -math.inf
        if kind == 3:
            lg = [v * 1e-4 for v in lg]
        lg = [f32(v) for v in lg]
        mx = max(lg)
        yield kind, [f32(math.exp(v - mx)) if v != -math.inf else 0.0 for v in lg]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rng = random.Random(1)
    fast, fell = [0] * 5, [0] * 5
    for kind, p in sets(n, rng):
        ok, ids, vals = pick_packed(p)
        if not ok:
            fell[kind] += 1
            continue
        fast[kind] += 1
        if (ids, vals) != pick(p):
            print("MISMATCH on a set of kind", kind)
            return 1
    print("pick_packed agrees with pick wherever it says exact; exact / fell back per kind "
          "(random, coarse ties, -inf, near ties, wide):", list(zip(fast, fell)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
