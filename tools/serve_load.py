#!/usr/bin/env python3
"""serve_load.py — a small load generator for `lilac serve`: C client
threads each send R chat-completions requests (greedy, ignore_eos, fixed
max_tokens) and the script reports requests/s, generated tokens/s, latency
percentiles and how many requests were refused with 429.

  python3 tools/serve_load.py --url http://127.0.0.1:8080 [--clients 4] [--requests 10] [--max-tokens 16]

Only the standard library is used.
"""
import argparse
import http.client
import json
import threading
import time
from urllib.parse import urlparse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=10, help="per client")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--stream", action="store_true")
    a = ap.parse_args()
    u = urlparse(a.url)
    lat, gen, refused, errors = [], [0], [0], []
    lock = threading.Lock()

    def client(i):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
        h = {"Content-Type": "application/json"}
        if a.key:
            h["Authorization"] = "Bearer " + a.key
        for k in range(a.requests):
            body = {"messages": [{"role": "user", "content": f"client {i} request {k}: say something"}],
                    "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True, "stream": a.stream}
            if a.stream:
                body["stream_options"] = {"include_usage": True}
            t0 = time.time()
            c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=h)
            r = c.getresponse()
            data = r.read()
            dt = time.time() - t0
            with lock:
                if r.status == 429:
                    refused[0] += 1
                elif r.status != 200:
                    errors.append((r.status, data[:200]))
                else:
                    lat.append(dt)
                    if a.stream:
                        last = [l for l in data.split(b"\n\n") if l.startswith(b"data: {")][-1]
                        gen[0] += json.loads(last[6:])["usage"]["completion_tokens"]
                    else:
                        gen[0] += json.loads(data)["usage"]["completion_tokens"]
        c.close()

    t0 = time.time()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.time() - t0
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
    print(f"clients {a.clients} x {a.requests} requests, max_tokens {a.max_tokens}{' (stream)' if a.stream else ''}: "
          f"{len(lat)} ok, {refused[0]} refused (429), {len(errors)} errors in {wall:.1f} s")
    print(f"  {len(lat) / wall:.2f} requests/s, {gen[0] / wall:.1f} generated tokens/s, "
          f"latency p50 {pct(0.5):.2f} s, p90 {pct(0.9):.2f} s, max {lat[-1] if lat else float('nan'):.2f} s")
    for e in errors[:5]:
        print("  error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
