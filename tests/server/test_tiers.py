"""test_tiers.py — `lilac serve --cache-ram`: snapshots evicted from the
slots are kept in host memory, below them on disk (--cache-dir).
Registered into test_server.py's list; uses its S["plain"] server (--slots 0)
for cold answers and starts its own, each with one slot so that every
snapshot but the last is evicted:

  R: RAM large enough for everything: a conversation's next turn after
     another conversation reuses its anchor from RAM (cached_tokens = the
     previous turn's prompt up to its assistant header, the cold server's
     answer), and /health's per-tier counters == /metrics', summing to the
     totals;
  B: RAM bounded to about two snapshots, with a directory: the bound holds,
     RAM evicts to disk, and the next turn reuses its anchor from disk; a
     restart on the same directory reuses that turn's whole prompt, from disk;
  the command line refuses bad --cache-ram values.
"""
import re
import subprocess

import test_agent as A
import test_server as T

HDR = b"<|im_start|>assistant\n"
KW = {"ignore_eos": True}  # no end-of-generation snapshots: the set of snapshots is known


def tiers(srv):
    return T.health(srv)["cache"]["tiers"]


def metric(body, name, tier):
    return float(re.search(rf'^{name}{{tier="{tier}"}} (\S+)$', body, re.M).group(1))


def two_conversations(c, tag):
    sa = {"role": "system", "content": f"You are the {tag} tier assistant A."}
    sb = {"role": "system", "content": f"You are the {tag} tier assistant B."}
    a1 = [sa, T.user("First question of A.")]
    ra = T.chat(c, a1, max_tokens=6, extra_body=KW)
    T.chat(c, [sb, T.user("First question of B.")], max_tokens=6, extra_body=KW)
    return a1 + [T.message_of(ra), T.user("Second question of A.")], A.count_upto_last({"messages": a1}, HDR)


def check_turn(c, msgs, want, what):
    r = T.chat(c, msgs, max_tokens=6, extra_body=KW)
    cold = T.chat(T.S["plain"].client(), msgs, max_tokens=6, extra_body=KW)
    assert T.message_of(r) == T.message_of(cold), (what, T.message_of(r), T.message_of(cold))
    want = r.usage.prompt_tokens if want == "all" else want
    assert r.usage.prompt_tokens_details.cached_tokens == want, (what, r.usage, want)
    return r


@T.test
def cache_ram_keeps_evicted_snapshots():
    srv = T.Server("tiers-ram", "--ctx", "2048", "--slots", "1", "--cache-ram", "64M", quiet=False)
    try:
        c = srv.client()
        assert "prefix cache in RAM: at most 64.0 MiB" in srv.read_log(), srv.read_log()
        a2, hdr = two_conversations(c, "ram")
        before = tiers(srv)
        assert before["device"]["evictions"] > 0 and before["ram"]["snapshots"] > 0, before
        check_turn(c, a2, hdr, "next turn from RAM")
        after = tiers(srv)
        assert after["ram"]["hits"] == before["ram"]["hits"] + 1, (before, after)
        assert after["ram"]["reused_tokens"] == before["ram"]["reused_tokens"] + hdr, (before, after)
        assert after["ram"]["bytes"] <= after["ram"]["capacity_bytes"] == 64 << 20, after
        assert after["disk"] == {"hits": 0, "reused_tokens": 0, "evictions": 0, "snapshots": 0, "bytes": 0,
                                 "capacity_bytes": 0}, after
        h = T.health(srv)["cache"]
        assert sum(t["hits"] for t in h["tiers"].values()) == h["hits"], h
        assert sum(t["reused_tokens"] for t in h["tiers"].values()) == h["reused_tokens"], h
        assert h["tiers"]["device"]["evictions"] == h["evictions"], h
        st, _, body = T.raw(srv, "GET", "/metrics")
        body = body.decode()
        for tier, t in h["tiers"].items():
            for key, name in (("hits", "hits_total"), ("reused_tokens", "reused_tokens_total"),
                              ("evictions", "evictions_total"), ("snapshots", "snapshots"), ("bytes", "bytes"),
                              ("capacity_bytes", "capacity_bytes")):
                assert metric(body, "lilac_prefix_cache_tier_" + name, tier) == t[key], (tier, key, t, body)
    finally:
        rc = srv.stop()
    log = srv.read_log()
    assert rc == 0, (rc, log[-3000:])
    assert "warning" not in log and re.search(r"prefix cache in RAM: \d+ snapshots? .* 1 restored", log), log[-2000:]


@T.test
def cache_ram_bound_spills_to_disk():
    d = T.TMP + "/tiers-dir"
    # one tiny-model snapshot of these prompts is about 0.25 MiB: RAM for two
    args = ("--ctx", "2048", "--slots", "1", "--cache-ram", "600K", "--cache-dir", d)
    srv = T.Server("tiers-bound", *args, quiet=False)
    try:
        c = srv.client()
        a2, hdr = two_conversations(c, "bound")
        t = tiers(srv)
        assert 0 < t["ram"]["bytes"] <= 600 << 10 and t["ram"]["evictions"] > 0, t
        assert t["disk"]["snapshots"] > 0, t  # RAM's evictions were written
        check_turn(c, a2, hdr, "next turn from disk")
        t2 = tiers(srv)
        assert t2["disk"]["hits"] == 1 and t2["disk"]["reused_tokens"] == hdr, t2
        assert t2["ram"]["bytes"] <= 600 << 10, t2
    finally:
        rc = srv.stop()
    assert rc == 0 and "warning" not in srv.read_log(), (rc, srv.read_log()[-3000:])
    srv = T.Server("tiers-restart", *args, quiet=False)
    try:
        # the first server wrote that turn's prompt end too: all of it is reused
        r = check_turn(srv.client(), a2, "all", "the same turn after a restart")
        t = tiers(srv)
        assert t["disk"]["hits"] == 1 and t["disk"]["reused_tokens"] == r.usage.prompt_tokens, t
    finally:
        rc = srv.stop()
    assert rc == 0 and "warning" not in srv.read_log(), (rc, srv.read_log()[-3000:])


@T.test
def cache_ram_refusals():
    for args, want in ((["--cache-ram", "0"], "positive byte count"), (["--cache-ram", "12X"], "positive byte count"),
                       (["--cache-ram", "-1G"], "positive byte count"),
                       (["--cache-ram", "1G", "--slots", "0"], "needs prefix-cache slots")):
        p = subprocess.run([T.LILAC, "serve", "--model", T.TINY, *args], capture_output=True, timeout=60)
        assert p.returncode == 2 and want in p.stderr.decode(), (args, p.returncode, p.stderr)
