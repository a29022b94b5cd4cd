"""test_metrics.py — GET /metrics: the Prometheus text format parsed line by
line (every sample belongs to a metric with HELP and TYPE, histograms are
cumulative and end in +Inf == _count), and the numbers move as requests are
made: answers by endpoint and status, tokens (== /health's counters), TTFT and
inter-token samples, prefill/decode work, the queue, the prefix cache and its
snapshot bytes.  /metrics wants the API key unless --metrics-open."""
import re

import test_server as T

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (-?[0-9.eE+-]+|[+-]Inf|NaN)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value}, with the format checked."""
    types, helps, out = {}, set(), {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split(" ")[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name not in types, f"TYPE twice: {name}"
            types[name] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels = m.group(1), frozenset(LABEL.findall(m.group(3) or ""))
            base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
            assert base in types and base in helps, f"{name}: no TYPE/HELP"
            assert (name, labels) not in out, f"duplicate sample {line}"
            out[(name, labels)] = float(m.group(4))
    for name, kind in types.items():
        if kind != "histogram":
            continue
        buckets = sorted(((float("inf") if dict(l)["le"] == "+Inf" else float(dict(l)["le"])), v)
                         for (n, l), v in out.items() if n == name + "_bucket")
        assert buckets and buckets[-1][0] == float("inf"), name
        counts = [v for _, v in buckets]
        assert counts == sorted(counts), f"{name}: buckets not cumulative"
        assert buckets[-1][1] == out[(name + "_count", frozenset())], name
    return out, types


def get(srv, headers=None):
    st, hd, body = T.raw(srv, "GET", "/metrics", headers=headers)
    assert st == 200 and hd["content-type"].startswith("text/plain"), (st, body[:200])
    return parse(body.decode())


def v(m, name, **labels):
    return m[0].get((name, frozenset(labels.items())), 0.0)


@T.test
def metrics_prometheus_text():
    srv = T.S["main"]
    st, _, _ = T.raw(srv, "GET", "/metrics", headers={"Authorization": ""})
    assert st == 401
    before = get(srv)
    c = srv.client()
    T.chat(c, [T.user("metrics one")], max_tokens=5)
    T.chat(c, [T.user("metrics one")], max_tokens=5)  # the same prompt: a cache hit
    list(T.chat(c, [T.user("metrics two")], max_tokens=4, stream=True))
    T.raw(srv, "POST", "/v1/chat/completions", body={"messages": "nope"})
    after = get(srv)
    ep = "/v1/chat/completions"
    assert v(after, "lilac_http_requests_total", endpoint=ep, status="200") - \
        v(before, "lilac_http_requests_total", endpoint=ep, status="200") == 3
    assert v(after, "lilac_http_requests_total", endpoint=ep, status="400") - \
        v(before, "lilac_http_requests_total", endpoint=ep, status="400") == 1
    assert v(after, "lilac_http_requests_total", endpoint="/metrics", status="401") >= 1
    h = T.health(srv)["cache"]
    assert v(after, "lilac_prompt_tokens_total") == h["prompt_tokens"]
    assert v(after, "lilac_cached_tokens_total") == h["cached_tokens"] == v(after, "lilac_prefix_cache_reused_tokens_total")
    assert v(after, "lilac_generated_tokens_total") == h["generated_tokens"]
    assert v(after, "lilac_prefix_cache_hits_total") == h["hits"] and h["hits"] > v(before, "lilac_prefix_cache_hits_total")
    assert v(after, "lilac_generated_tokens_total") - v(before, "lilac_generated_tokens_total") >= 3
    n_ttft = v(after, "lilac_time_to_first_token_seconds_count") - v(before, "lilac_time_to_first_token_seconds_count")
    assert n_ttft == 3, n_ttft
    assert v(after, "lilac_inter_token_latency_seconds_count") > v(before, "lilac_inter_token_latency_seconds_count")
    assert v(after, "lilac_decode_tokens_per_second") > 0 and v(after, "lilac_prefill_tokens_per_second") > 0
    assert v(after, "lilac_prefill_tokens_total") + v(after, "lilac_cached_tokens_total") <= v(after, "lilac_prompt_tokens_total")
    assert v(after, "lilac_queue_capacity") == 4 and v(after, "lilac_queue_waiting") == 0
    snaps = v(after, "lilac_prefix_cache_snapshots")
    assert 1 <= snaps <= 8 and v(after, "lilac_prefix_cache_snapshot_bytes") == snaps * v(after, "lilac_session_bytes")
    assert after[1]["lilac_time_to_first_token_seconds"] == "histogram"
    assert after[1]["lilac_http_requests_total"] == "counter" and after[1]["lilac_queue_waiting"] == "gauge"
    assert ("lilac_gpu_memory_used_bytes", frozenset()) not in after[0]  # the CPU has none


@T.test
def metrics_open_flag():
    srv = T.Server("metrics-open", "--ctx", "1024", "--metrics-open")
    try:
        m = get(srv, headers={"Authorization": ""})  # no key needed for /metrics
        assert v(m, "lilac_context_tokens") == 1024
        st, _, _ = T.raw(srv, "GET", "/v1/models", headers={"Authorization": ""})
        assert st == 401  # the rest still wants it
    finally:
        assert srv.stop() == 0
