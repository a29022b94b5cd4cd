#!/usr/bin/env python3
"""soak.py — a bounded load test of `lilac serve` that checks nothing is lost.

N concurrent clients (default 16) for M minutes (or until --requests) send a
mix of: non-streaming and streaming chat, chat with tools and tool results,
completions with random stop strings, streams cancelled mid-way, oversized
and malformed bodies, and bursts past the queue (429).  Every answer's shape
is checked; every greedy answer must equal the same request's answer on the
idle server (taken before the load starts); the server's RSS, and on a GPU
the device memory in use (/metrics), must not grow after warm-up.  Loopback
only: it refuses any other address.

    python3 tools/soak.py --lilac ./lilac [--minutes 10] [--clients 16]   # starts its own server
    python3 tools/soak.py --url http://127.0.0.1:8080 [--pid PID] ...     # a running one

Exit status 0 when every check held; prints a summary (and --json FILE).
Only the standard library: it runs without the test venv.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

TINY = "tests/fixtures/tiny"
LOOPBACK = {"127.0.0.1", "::1", "localhost"}

PROMPTS = [
    "Tell me about the sea.", "What is two plus two?", "Write a haiku about rain.", "List three colours.",
    "Explain recursion briefly.", "Say hello in French.", "Name a prime number.", "Describe a cat.",
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
SYSTEM = {"role": "system", "content": "You are a terse assistant."}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Soak:
    def __init__(self, a):
        self.a = a
        u = urllib.parse.urlparse(a.url)
        self.host, self.port = u.hostname, u.port or 80
        self.key = a.api_key
        self.lock = threading.Lock()
        self.counts = {}      # outcome kind -> count
        self.failures = []    # (kind, message)
        self.ttft = []        # seconds, streaming requests
        self.latency = []     # seconds, non-streaming greedy chat
        self.baseline = {}    # request key -> expected answer
        self.n_requests = 0
        self.stop_at = 0.0

    # ------------------------------------------------------------ plumbing

    def headers(self, extra=None):
        h = {"Content-Type": "application/json", "Connection": "close"}
        if self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(extra or {})
        return h

    def post(self, path, body, timeout=600):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        c.request("POST", path, body=data, headers=self.headers())
        r = c.getresponse()
        out = r.read()
        hd = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        return r.status, hd, out

    def gpu_used_mib(self):
        """The device's memory in use, from /metrics (None without a GPU)."""
        try:
            c = http.client.HTTPConnection(self.host, self.port, timeout=30)
            c.request("GET", "/metrics", headers=self.headers())
            text = c.getresponse().read().decode(errors="replace")
            c.close()
        except (OSError, http.client.HTTPException):
            return None
        m = re.search(r"^lilac_gpu_memory_used_bytes (\S+)$", text, re.M)
        return round(float(m.group(1)) / 1048576, 1) if m else None

    def stream(self, path, body, timeout=600):
        """Yields (t, event dict or "[DONE]"); status and headers first as ("status", st, hd)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request("POST", path, body=json.dumps(body).encode(), headers=self.headers())
        r = c.getresponse()
        yield ("status", r.status, {k.lower(): v for k, v in r.getheaders()}, r)
        buf = b""
        while True:
            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                if frame.startswith(b":"):
                    continue
                check(frame.startswith(b"data: "), f"SSE frame without data: {frame[:80]!r}")
                payload = frame[6:]
                yield (time.time(), "[DONE]" if payload == b"[DONE]" else json.loads(payload))
        c.close()

    def count(self, kind):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def fail(self, kind, msg):
        with self.lock:
            self.failures.append((kind, str(msg)[:500]))
            self.counts["FAILED " + kind] = self.counts.get("FAILED " + kind, 0) + 1

    # ------------------------------------------------------------ requests

    def chat_body(self, i, tools=False, stream=False):
        msgs = [SYSTEM, {"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
        if tools and i % 2:
            msgs += [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
        # a seed makes tool-call ids reproducible too
        b = {"model": "soak", "messages": msgs, "max_tokens": self.a.max_tokens, "temperature": 0, "seed": 7}
        if tools:
            b["tools"] = TOOLS
        if stream:
            b["stream"] = True
            b["stream_options"] = {"include_usage": True}
        return b

    @staticmethod
    def chat_shape(o):
        check(o.get("object") == "chat.completion" and o["id"].startswith("chatcmpl-"), f"not a chat.completion: {o}")
        check(len(o["choices"]) == 1, "choices")
        ch = o["choices"][0]
        check(ch["finish_reason"] in ("stop", "length", "tool_calls"), f"finish_reason {ch['finish_reason']}")
        m = ch["message"]
        check(m["role"] == "assistant" and (m["content"] is None or isinstance(m["content"], str)), f"message {m}")
        u = o["usage"]
        check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], f"usage {u}")
        return (m.get("reasoning_content"), m.get("content"), json.dumps(m.get("tool_calls"), sort_keys=True),
                ch["finish_reason"], u["completion_tokens"])

    @staticmethod
    def error_shape(data, status):
        e = json.loads(data)["error"]
        check(set(e) == {"message", "type", "param", "code"} and e["message"], f"{status}: error object {e}")
        return e

    def answer(self, status, hd, data, key):
        """A non-streaming chat answer: 200 equal to the baseline, or 429 of the right shape."""
        if status == 429:
            e = self.error_shape(data, status)
            check(e["code"] == "rate_limit_exceeded" and int(hd.get("retry-after", "0")) >= 1, f"429 {e} {hd}")
            return "429 queue full"
        check(status == 200, f"status {status}: {data[:300]!r}")
        got = self.chat_shape(json.loads(data))
        if key in self.baseline:
            check(got == self.baseline[key], f"greedy answer differs from the idle server's: {got} vs {self.baseline[key]}")
        return None

    def do_chat(self, rnd, tools):
        i = rnd.randrange(len(PROMPTS))
        t0 = time.time()
        st, hd, data = self.post("/v1/chat/completions", self.chat_body(i, tools))
        k = self.answer(st, hd, data, ("chat", i, tools))
        if k:
            return k
        with self.lock:
            self.latency.append(time.time() - t0)
        return "chat+tools" if tools else "chat"

    def do_stream(self, rnd, cancel):
        i = rnd.randrange(len(PROMPTS))
        t0 = time.time()
        it = self.stream("/v1/chat/completions", self.chat_body(i, stream=True))
        _, st, hd, resp = next(it)
        if st == 429:
            data = resp.read()
            e = self.error_shape(data, st)
            check(e["code"] == "rate_limit_exceeded", f"429 {e}")
            return "429 queue full"
        check(st == 200 and hd.get("content-type", "").startswith("text/event-stream"), f"stream status {st} {hd}")
        reasoning, content, finish, usage, first, n = "", "", None, None, None, 0
        stop_after = rnd.randint(1, 4) if cancel else None
        done = False
        for t, ev in it:
            if ev == "[DONE]":
                done = True
                break
            check("error" not in ev, f"error event {ev}")
            check(ev["object"] == "chat.completion.chunk", f"chunk {ev}")
            if ev.get("usage"):
                usage = ev["usage"]
                continue
            d = ev["choices"][0]["delta"]
            if (d.get("content") or d.get("reasoning_content")) and first is None:
                first = t - t0
            reasoning += d.get("reasoning_content") or ""
            content += d.get("content") or ""
            finish = ev["choices"][0]["finish_reason"] or finish
            n += 1
            if stop_after is not None and n >= stop_after:
                resp.close()  # hang up mid-stream
                return "stream cancelled by the client"
        if first is not None:
            with self.lock:
                self.ttft.append(first)
        check(done and finish and usage, f"stream ended without finish/usage/[DONE] ({finish}, {usage}, {done})")
        b = self.baseline.get(("chat", i, False))
        if b:
            check((reasoning or None, content or None, finish, usage["completion_tokens"]) ==
                  (b[0] or None, b[1] or None, b[3], b[4]), f"stream differs from the idle answer: {reasoning!r} {content!r}")
        return "stream"

    def do_stop(self, rnd):
        i = rnd.randrange(len(PROMPTS))
        text = self.baseline.get(("completion", i))
        if not text or len(text) < 4:
            return self.do_chat(rnd, False)
        a = rnd.randrange(1, len(text) - 2)
        stop = text[a:a + rnd.randint(1, 3)]
        if "\ufffd" in stop:  # a repaired byte: the generated bytes differ
            return self.do_chat(rnd, False)
        body = {"model": "soak", "prompt": PROMPTS[i], "max_tokens": self.a.max_tokens, "temperature": 0,
                "stop": [stop]}
        st, hd, data = self.post("/v1/completions", body)
        if st == 429:
            self.error_shape(data, st)
            return "429 queue full"
        check(st == 200, f"completion status {st}: {data[:200]!r}")
        o = json.loads(data)
        got = o["choices"][0]
        want = text[:text.find(stop)]
        check(got["text"] == want and got["finish_reason"] == "stop",
              f"stop {stop!r}: got {got['text']!r} ({got['finish_reason']}), want {want!r}")
        return "completion with a stop string"

    def do_bad(self, rnd):
        kind = rnd.randrange(4)
        if kind == 0:  # over --max-body
            st, hd, data = self.post("/v1/chat/completions", b"{" + b" " * (self.a.max_body + 10) + b"}")
            check(st == 413, f"oversized body: {st}")
            self.error_shape(data, st)
            return "413 body too large"
        bodies = [b"{", b'{"messages": "x"}', b'{"messages": [{"role": "user", "content": [{"type": "image_url", '
                  b'"image_url": {"url": "x"}}]}]}', b'{"messages": [{"role": "user", "content": "x"}], "n": 3}',
                  b"\xff\xfe", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}']
        st, hd, data = self.post("/v1/chat/completions", rnd.choice(bodies))
        check(st == 400, f"malformed body: {st} {data[:200]!r}")
        self.error_shape(data, st)
        return "400 malformed"

    def do_burst(self, rnd):
        """queue + 4 requests at once: some must be 429, the rest equal to the baseline."""
        n = self.a.queue + 4
        res = [None] * n

        def one(j):
            try:
                i = j % len(PROMPTS)
                st, hd, data = self.post("/v1/chat/completions", self.chat_body(i))
                res[j] = self.answer(st, hd, data, ("chat", i, False)) or "ok"
            except Failure as e:
                res[j] = "FAIL " + str(e)
            except Exception as e:  # noqa: BLE001
                res[j] = "FAIL " + repr(e)
        ts = [threading.Thread(target=one, args=(j,)) for j in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        bad = [r for r in res if r.startswith("FAIL")]
        check(not bad, f"burst: {bad[:3]}")
        with self.lock:
            self.n_requests += n - 1
        for r in res[1:]:
            self.count("burst: " + ("200" if r == "ok" else r))
        return "burst: " + ("200" if res[0] == "ok" else res[0])

    # ------------------------------------------------------------ driving

    def take_baselines(self):
        for i in range(len(PROMPTS)):
            for tools in (False, True):
                st, hd, data = self.post("/v1/chat/completions", self.chat_body(i, tools))
                check(st == 200, f"baseline: {st} {data[:200]!r}")
                self.baseline[("chat", i, tools)] = self.chat_shape(json.loads(data))
            st, hd, data = self.post("/v1/completions", {"model": "soak", "prompt": PROMPTS[i],
                                                         "max_tokens": self.a.max_tokens, "temperature": 0})
            check(st == 200, f"baseline completion: {st}")
            self.baseline[("completion", i)] = json.loads(data)["choices"][0]["text"]

    def client(self, cid):
        rnd = random.Random(self.a.seed * 1000 + cid)
        acts = [("chat", 30), ("tools", 10), ("stream", 25), ("cancel", 10), ("stop", 15), ("bad", 8), ("burst", 2)]
        names = [x for x, w in acts for _ in range(w)]
        while time.time() < self.stop_at:
            with self.lock:
                if self.n_requests >= self.a.requests:
                    return
                self.n_requests += 1
            act = rnd.choice(names)
            try:
                kind = {"chat": lambda: self.do_chat(rnd, False), "tools": lambda: self.do_chat(rnd, True),
                        "stream": lambda: self.do_stream(rnd, False), "cancel": lambda: self.do_stream(rnd, True),
                        "stop": lambda: self.do_stop(rnd), "bad": lambda: self.do_bad(rnd),
                        "burst": lambda: self.do_burst(rnd)}[act]()
                self.count(kind)
                if kind.startswith("429"):
                    time.sleep(1.0)  # Retry-After: 1, as a polite client does
            except Failure as e:
                self.fail(act, e)
            except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
                self.fail(act, repr(e))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lilac", help="start this lilac binary on --model (default mode)")
    ap.add_argument("--model", default=TINY)
    ap.add_argument("--url", help="a running server instead (loopback only)")
    ap.add_argument("--pid", type=int, help="with --url: the server's pid, for RSS")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--requests", type=int, default=1_000_000, help="stop after this many requests")
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--queue", type=int, default=8, help="the server's --queue (set when starting it)")
    ap.add_argument("--max-body", type=int, default=65536, help="the server's --max-body (set when starting it)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds before the RSS baseline (default: 20%% of the run)")
    ap.add_argument("--rss-slack-mib", type=float, default=16.0, help="allowed RSS growth after warm-up")
    ap.add_argument("--gpu-slack-mib", type=float, default=64.0,
                    help="allowed growth of the GPU memory in use after warm-up (read from /metrics)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--server-args", default="", help="extra arguments for lilac serve")
    a = ap.parse_args()
    if a.minutes <= 0 or a.minutes > 120 or a.clients < 1 or a.clients > 256:
        sys.exit("soak.py: --minutes must be in (0, 120] and --clients in [1, 256]")
    proc = None
    log = None
    if not a.url:
        if not a.lilac:
            sys.exit("soak.py: give --lilac PATH (to start a server) or --url URL")
        log = tempfile.NamedTemporaryFile(prefix="lilac-soak-", suffix=".log", delete=False)
        a.api_key = a.api_key or "soak-key"
        cmd = [a.lilac, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0", "--ctx", "2048",
               "--queue", str(a.queue), "--max-body", str(a.max_body), "--max-conns", str(4 * a.clients + 16),
               "--api-key", a.api_key, "--quiet", *a.server_args.split()]
        proc = subprocess.Popen(cmd, stdout=log, stderr=log)
        t0 = time.time()
        while time.time() - t0 < 120:
            m = re.search(r"listening on http://[^ ]*:(\d+)", open(log.name, errors="replace").read())
            if m:
                a.url = f"http://127.0.0.1:{m.group(1)}"
                break
            if proc.poll() is not None:
                sys.exit("soak.py: the server exited: " + open(log.name, errors="replace").read()[-2000:])
            time.sleep(0.05)
        else:
            proc.kill()
            sys.exit("soak.py: the server did not start")
        a.pid = proc.pid
    host = urllib.parse.urlparse(a.url).hostname
    if host not in LOOPBACK:
        sys.exit(f"soak.py: {host} is not a loopback address; the soak test only runs against this machine")

    s = Soak(a)
    ok = True
    try:
        s.take_baselines()
        start = time.time()
        s.stop_at = start + a.minutes * 60
        warmup = a.warmup if a.warmup is not None else 0.2 * a.minutes * 60
        rss = {"start": rss_kib(a.pid) if a.pid else None, "after_warmup": None, "end": None, "max": 0}
        gpu = {"start": s.gpu_used_mib(), "after_warmup": None, "end": None, "max": 0}
        ts = [threading.Thread(target=s.client, args=(i,), daemon=True) for i in range(a.clients)]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts):
            time.sleep(1)
            r = rss_kib(a.pid) if a.pid else None
            if r:
                rss["max"] = max(rss["max"], r)
                if rss["after_warmup"] is None and time.time() - start >= warmup:
                    rss["after_warmup"] = r
            if gpu["start"] is not None and int(time.time() - start) % 10 == 0:  # /metrics every ~10 s
                g = s.gpu_used_mib()
                if g is not None:
                    gpu["max"] = max(gpu["max"], g)
                    if gpu["after_warmup"] is None and time.time() - start >= warmup:
                        gpu["after_warmup"] = g
        for t in ts:
            t.join()
        wall = time.time() - start
        # the engine must be idle and answer like before
        st, _, data = s.post("/v1/chat/completions", s.chat_body(0))
        try:
            s.answer(st, {}, data, ("chat", 0, False))
        except Failure as e:
            s.fail("after the load", e)
        rss["end"] = rss_kib(a.pid) if a.pid else None
        if rss["after_warmup"] is None:
            rss["after_warmup"] = rss["end"]
        if rss["end"] and rss["after_warmup"] and rss["end"] - rss["after_warmup"] > a.rss_slack_mib * 1024:
            s.fail("memory", f"RSS grew from {rss['after_warmup']} KiB after warm-up to {rss['end']} KiB")
        if gpu["start"] is not None:
            gpu["end"] = s.gpu_used_mib()
            if gpu["after_warmup"] is None:
                gpu["after_warmup"] = gpu["end"]
            if gpu["end"] is not None and gpu["end"] - gpu["after_warmup"] > a.gpu_slack_mib:
                s.fail("memory", f"GPU memory grew from {gpu['after_warmup']} MiB after warm-up to {gpu['end']} MiB")
        served = sum(v for k, v in s.counts.items() if not k.startswith("FAILED"))  # answers checked
        summary = {
            "url": a.url, "clients": a.clients, "minutes": a.minutes, "wall_s": round(wall, 1),
            "requests": s.n_requests, "outcomes": dict(sorted(s.counts.items())), "served": served,
            "failures": len(s.failures),
            "ttft_s": {"p50": pct(s.ttft, 50), "p99": pct(s.ttft, 99), "n": len(s.ttft)},
            "chat_latency_s": {"p50": pct(s.latency, 50), "p99": pct(s.latency, 99), "n": len(s.latency)},
            "rss_kib": rss,
            "gpu_used_mib": gpu if gpu["start"] is not None else None,
        }
        for k, m in s.failures[:20]:
            print(f"FAIL {k}: {m}")
        print(json.dumps(summary, indent=2))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=2)
        ok = not s.failures
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "timeout"
            if rc != 0:
                print(f"FAIL: the server exited with {rc}:\n" + open(log.name, errors="replace").read()[-3000:])
                ok = False
            else:
                print("server stopped cleanly (exit 0)")
            os.unlink(log.name)
    print("soak: PASS" if ok else "soak: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
