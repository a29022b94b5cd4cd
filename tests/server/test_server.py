#!/usr/bin/env python3
"""test_server.py — `lilac serve` end to end, with real clients.

Starts servers on the tiny fixture (tests/fixtures/tiny, a 512-token model
that writes gibberish), talks to them with the official `openai` package and
with curl, and stops them with SIGTERM (exit code 0 required: under ASan this
also means no leaks).  The assertions are about protocol and consistency:
response shapes, stream == non-stream, usage == the tokenizer's count of the
rendered prompt, cached == uncached output, seed reproducibility, status codes
of bad requests, queueing, cancellation and shutdown.

Usage: test_server.py --lilac PATH [TEST_NAME ...]
Prints one line per test and ends with "N passed, N failed".
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import openai

TINY = "tests/fixtures/tiny"
KEY = "sk-test-0123456789"
LILAC = "./lilac"
TMP = tempfile.mkdtemp(prefix="lilac-server-test-")

# ---------------------------------------------------------------- servers


class Server:
    """One `lilac serve` process on a free port (--port 0, read from its log)."""

    def __init__(self, name, *args, key=KEY, quiet=True):
        self.name = name
        self.key = key
        self.log_path = os.path.join(TMP, name + ".log")
        self.log = open(self.log_path, "w+b")
        cmd = [LILAC, "--threads", "2", "serve", "--model", TINY, "--port", "0", *(["--quiet"] if quiet else []), *args]
        if key:
            cmd += ["--api-key", key]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {name} exited: {self.read_log()}")
            m = re.search(r"listening on http://[^:]+:(\d+)", self.read_log())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            raise RuntimeError(f"server {name} did not start: {self.read_log()}")
        self.url = f"http://127.0.0.1:{self.port}"

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.key or "none", max_retries=0, timeout=600, **kw)

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "timeout"
        self.log.close()
        return rc


def raw(server, method, path, body=None, headers=None, timeout=600):
    """A plain HTTP request; returns (status, headers dict, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    h = {"Authorization": f"Bearer {server.key}"} if server.key else {}
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
    if body is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    hd = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hd, data


def curl(*args):
    p = subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def health(server):
    st, _, body = raw(server, "GET", "/health")
    assert st == 200, (st, body)
    return json.loads(body)


def prompt_token_count(request, upto=None):
    """The tokenizer's count of the prompt `lilac render` makes of request
    (of the text before the first occurrence of `upto`, when given)."""
    path = os.path.join(TMP, "req.json")
    with open(path, "w") as f:
        json.dump(request, f)
    prompt = subprocess.run([LILAC, "render", path], capture_output=True, check=True).stdout
    if upto is not None:
        prompt = prompt[:prompt.index(upto)]
    ppath = os.path.join(TMP, "prompt.txt")
    with open(ppath, "wb") as f:
        f.write(prompt)
    ids = subprocess.run([LILAC, "tokenize", "--model", TINY, "--file", ppath], capture_output=True, check=True).stdout
    return len(json.loads(ids))


# ------------------------------------------------------------------ data

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                                      "days": {"type": "integer"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Adds numbers",
                                      "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                                                                                      "b": {"type": "number"}}}}},
]
SYSTEM = {"role": "system", "content": "You are a terse assistant."}


def user(text):
    return {"role": "user", "content": text}


def chat(client, messages, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 8)
    kw.setdefault("model", "tiny")
    return client.chat.completions.create(messages=messages, **kw)


def message_of(resp):
    """The assistant message as a client sends it back."""
    m = resp.choices[0].message
    d = {"role": "assistant", "content": m.content}
    rc = getattr(m, "reasoning_content", None)
    if rc is not None:
        d["reasoning_content"] = rc
    if m.tool_calls:
        d["tool_calls"] = [{"id": t.id, "type": "function",
                            "function": {"name": t.function.name, "arguments": t.function.arguments}}
                           for t in m.tool_calls]
    return d


def collect_stream(stream):
    """Concatenates a chat stream: (role, reasoning, content, tool_calls, finish, usage, logprobs, chunks)."""
    role = None
    reasoning, content, logprobs = "", "", []
    calls = {}
    finish, usage, n = None, None, 0
    for ch in stream:
        n += 1
        if ch.usage is not None:
            assert not ch.choices, "the usage chunk has no choices"
            usage = ch.usage
            continue
        assert len(ch.choices) == 1 and ch.object == "chat.completion.chunk"
        c = ch.choices[0]
        d = c.delta
        if d.role:
            assert role is None and n == 1, "role comes once, first"
            role = d.role
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        for tc in d.tool_calls or []:
            if tc.id:
                assert tc.index not in calls, "a tool call starts once"
                assert tc.function.name, "the first tool_calls delta has the name"
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments or ""}
            else:
                calls[tc.index]["arguments"] += tc.function.arguments or ""
        if c.logprobs and c.logprobs.content:
            logprobs += [(x.token, x.logprob) for x in c.logprobs.content]
        if c.finish_reason:
            assert finish is None
            finish = c.finish_reason
    return role, reasoning, content, calls, finish, usage, logprobs, n


def assert_stream_equals(client, messages, **kw):
    r = chat(client, messages, **kw)
    s = chat(client, messages, stream=True, stream_options={"include_usage": True}, **kw)
    role, reasoning, content, calls, finish, usage, lps, _ = collect_stream(s)
    m = r.choices[0].message
    assert role == "assistant"
    assert reasoning == (getattr(m, "reasoning_content", None) or ""), (reasoning, m)
    assert content == (m.content or ""), (content, m.content)
    want = {i: {"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
            for i, t in enumerate(m.tool_calls or [])}
    assert {i: (c["name"], c["arguments"]) for i, c in calls.items()} == \
        {i: (c["name"], c["arguments"]) for i, c in want.items()}
    assert finish == r.choices[0].finish_reason, (finish, r.choices[0].finish_reason)
    assert usage.prompt_tokens == r.usage.prompt_tokens and usage.completion_tokens == r.usage.completion_tokens
    if r.choices[0].logprobs:
        assert lps == [(x.token, x.logprob) for x in r.choices[0].logprobs.content]
    return r


# ----------------------------------------------------------------- tests

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


S = {}  # servers: main (API key, queue 4), plain (no key, --slots 0)


@test
def endpoints_and_auth():
    srv = S["main"]
    h = health(srv)  # no key needed
    assert h["status"] == "ok" and h["cache"]["slots"] == 8
    models = srv.client().models.list()
    assert [m.id for m in models.data] == ["tiny"]
    for bad in (None, "wrong-key", KEY + "x", KEY[:-1]):
        st, hd, body = raw(srv, "GET", "/v1/models", headers={"Authorization": f"Bearer {bad}"} if bad else
                           {"Authorization": ""})
        err = json.loads(body)["error"]
        assert st == 401 and err["code"] == "invalid_api_key" and set(err) == {"message", "type", "param", "code"}
    try:
        openai.OpenAI(base_url=srv.url + "/v1", api_key="nope", max_retries=0).chat.completions.create(
            model="tiny", messages=[user("hi")])
        raise AssertionError("no 401")
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    st, _, body = raw(srv, "GET", "/v1/nothing")
    assert st == 404 and json.loads(body)["error"]["type"] == "invalid_request_error"
    st, hd, _ = raw(srv, "GET", "/v1/chat/completions")
    assert st == 405 and hd.get("allow") == "POST, OPTIONS"
    st, hd, _ = raw(srv, "POST", "/v1/models", body={})
    assert st == 405 and hd.get("allow") == "GET, HEAD, OPTIONS"


@test
def probed_endpoints():
    """What clients probe: models.retrieve, HEAD, OPTIONS, endpoints lilac does not implement, huge headers."""
    srv = S["main"]
    c = srv.client()
    m = c.models.retrieve("tiny")
    assert m.id == "tiny" and m.object == "model" and m.owned_by == "lilac"
    try:
        c.models.retrieve("gpt-4o")
        raise AssertionError("another model's id was found")
    except openai.NotFoundError as e:
        assert e.status_code == 404 and e.body["code"] == "model_not_found" and "gpt-4o" in e.message, e.body
    for path in ("/health", "/v1/models", "/v1/models/tiny"):
        st, hd, body = raw(srv, "HEAD", path)
        gst, ghd, gbody = raw(srv, "GET", path)
        assert st == 200 == gst and body == b"" and hd["content-type"] == "application/json", (path, st, hd, body)
        assert int(hd["content-length"]) > 0, hd  # the GET body's length
    st, hd, body = raw(srv, "HEAD", "/v1/chat/completions")
    assert st == 405 and hd["allow"] == "POST, OPTIONS" and body == b"", (st, hd)
    st, hd, body = raw(srv, "HEAD", "/v1/models", headers={"Authorization": "Bearer wrong"})
    assert st == 401 and body == b"", st
    # OPTIONS with no --cors: 204 and Allow, nothing a browser would take as permission
    st, hd, body = raw(srv, "OPTIONS", "/v1/chat/completions",
                       headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert st == 204 and hd["allow"] == "POST, OPTIONS" and "access-control-allow-origin" not in hd, (st, hd)
    st, hd, body = raw(srv, "OPTIONS", "/v1/models", headers={"Authorization": ""})
    assert st == 204 and hd["allow"] == "GET, HEAD, OPTIONS", (st, hd)
    # OpenAI endpoints lilac does not implement
    for method, path in (("POST", "/v1/embeddings"), ("POST", "/v1/audio/transcriptions"),
                         ("POST", "/v1/audio/speech"), ("POST", "/v1/images/generations"), ("GET", "/v1/embeddings")):
        st, hd, body = raw(srv, method, path, body={} if method == "POST" else None)
        err = json.loads(body)["error"]
        assert st == 404 and "not supported by this server" in err["message"] and path in err["message"], (path, err)
        assert err["code"] == "unsupported_endpoint" and set(err) == {"message", "type", "param", "code"}, err
    try:
        c.embeddings.create(model="tiny", input="x")
        raise AssertionError("embeddings answered")
    except openai.NotFoundError as e:
        assert "not supported by this server" in e.message
    st, _, body = raw(srv, "GET", "/v1/nothing")
    assert st == 404 and "no such endpoint" in json.loads(body)["error"]["message"]
    # a 100 KB header: 431 as an OpenAI error object
    st, hd, body = raw(srv, "GET", "/v1/models", headers={"X-Big": "a" * 100000})
    err = json.loads(body)["error"]
    assert st == 431 and err["code"] == "request_header_fields_too_large" and hd["content-type"] == "application/json", (st, body[:200])
    assert health(srv)["status"] == "ok"


@test
def tokenize_detokenize():
    """llama.cpp's /tokenize and /detokenize shapes, equal to `lilac tokenize` / `detokenize`."""
    srv = S["main"]
    text = "Hello, world! <|im_start|>user"
    cli = json.loads(subprocess.run([LILAC, "tokenize", "--model", TINY, text], capture_output=True, check=True).stdout)
    st, _, body = raw(srv, "POST", "/tokenize", body={"content": text})
    assert st == 200 and json.loads(body) == {"tokens": cli}, (st, body)
    split = json.loads(subprocess.run([LILAC, "tokenize", "--model", TINY, "--split-special", text],
                                      capture_output=True, check=True).stdout)
    st, _, body = raw(srv, "POST", "/tokenize", body={"content": text, "parse_special": False, "add_special": True})
    assert st == 200 and json.loads(body)["tokens"] == split != cli, body
    st, _, body = raw(srv, "POST", "/tokenize", body={"content": text, "with_pieces": True})
    toks = json.loads(body)["tokens"]
    assert [t["id"] for t in toks] == cli and "".join(t["piece"] for t in toks) == text, toks
    st, _, body = raw(srv, "POST", "/detokenize", body={"tokens": cli})
    assert st == 200 and json.loads(body) == {"content": text}, body
    st, _, body = raw(srv, "POST", "/detokenize", body={"tokens": []})
    assert st == 200 and json.loads(body) == {"content": ""}, body
    for path, bad, param in (("/tokenize", {}, "content"), ("/tokenize", {"content": 5}, "content"),
                             ("/tokenize", {"content": "a", "with_pieces": "yes"}, "with_pieces"),
                             ("/detokenize", {}, "tokens"), ("/detokenize", {"tokens": "1,2"}, "tokens"),
                             ("/detokenize", {"tokens": [1, 512]}, "tokens"), ("/detokenize", {"tokens": [-1]}, "tokens"),
                             ("/detokenize", {"tokens": [1.5]}, "tokens")):
        st, _, body = raw(srv, "POST", path, body=bad)
        err = json.loads(body)["error"]
        assert st == 400 and err["param"] == param, (path, bad, st, err)
    st, _, body = raw(srv, "POST", "/tokenize", body=b"{")
    assert st == 400 and "not valid JSON" in json.loads(body)["error"]["message"]
    st, _, body = raw(srv, "POST", "/tokenize", body={"content": "x"}, headers={"Authorization": ""})
    assert st == 401, st  # the API key covers every endpoint but /health
    st, hd, _ = raw(srv, "GET", "/tokenize")
    assert st == 405 and hd["allow"] == "POST, OPTIONS"


@test
def cors():
    srv = Server("cors", "--ctx", "1024", "--cors", "http://localhost:3000,https://app.example")
    anyo = Server("cors-any", "--ctx", "1024", "--cors-any-origin", key=None)
    try:
        assert "CORS: pages from http://localhost:3000,https://app.example" in srv.read_log()
        pre = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os", "Authorization": ""}
        st, hd, body = raw(srv, "OPTIONS", "/v1/chat/completions", headers=pre)
        assert st == 204 and body == b"", (st, body)
        assert hd["access-control-allow-origin"] == "http://localhost:3000" and hd["vary"] == "Origin", hd
        assert hd["access-control-allow-methods"] == "POST, OPTIONS", hd
        assert hd["access-control-allow-headers"] == "authorization, content-type, x-stainless-os", hd
        assert int(hd["access-control-max-age"]) > 0
        st, hd, _ = raw(srv, "OPTIONS", "/v1/chat/completions", headers={**pre, "Origin": "http://localhost:3001"})
        assert st == 204 and "access-control-allow-origin" not in hd, hd
        # the answers carry the header too, errors included, so the page can read them
        req = {"messages": [user("hi")], "max_tokens": 2}
        st, hd, body = raw(srv, "POST", "/v1/chat/completions", body=req, headers={"Origin": "https://app.example"})
        assert st == 200 and hd["access-control-allow-origin"] == "https://app.example", hd
        st, hd, body = raw(srv, "POST", "/v1/chat/completions", body=req,
                           headers={"Origin": "https://app.example", "Authorization": "Bearer nope"})
        assert st == 401 and hd["access-control-allow-origin"] == "https://app.example", hd
        st, hd, body = raw(srv, "POST", "/v1/chat/completions", body={**req, "stream": True},
                           headers={"Origin": "https://app.example"})
        assert st == 200 and hd["access-control-allow-origin"] == "https://app.example" and body.endswith(b"[DONE]\n\n")
        st, hd, _ = raw(srv, "GET", "/health", headers={"Origin": "https://other.example"})
        assert st == 200 and "access-control-allow-origin" not in hd
        st, hd, _ = raw(anyo, "OPTIONS", "/v1/models", headers={"Origin": "http://x.example",
                                                                "Access-Control-Request-Method": "GET"})
        assert st == 204 and hd["access-control-allow-origin"] == "*" and "vary" not in hd, hd
        assert hd["access-control-allow-headers"] == "Authorization, Content-Type", hd
        st, hd, _ = raw(anyo, "GET", "/v1/models", headers={"Origin": "http://x.example"})
        assert st == 200 and hd["access-control-allow-origin"] == "*"
    finally:
        assert srv.stop() == 0 and anyo.stop() == 0


@test
def readme_first_curl_gets_content():
    """The README's first curl example, as written, answers with content (thinking off), not content: null."""
    readme = open("README.md", encoding="utf-8").read()
    m = re.search(r"curl http://127\.0\.0\.1:8080/v1/chat/completions.*?-d '(.*?)'", readme, re.S)
    assert m, "no curl example in README.md"
    body = json.loads(m.group(1))
    st, _, data = raw(S["plain"], "POST", "/v1/chat/completions", body=body)
    choice = json.loads(data)["choices"][0]
    msg = choice["message"]
    # (sampled with a random seed: an end token first would leave no content, rarely)
    assert st == 200 and (msg["content"] or choice["finish_reason"] == "stop"), choice
    assert msg.get("reasoning_content") is None, msg
    assert "Thinking is on by default" in readme[m.end():m.end() + 300]


@test
def chat_shape_and_usage():
    c = S["main"].client()
    req = {"messages": [SYSTEM, user("Hello there, how are you?")]}
    r = chat(c, req["messages"], max_tokens=6, user="someone", metadata={"x": "y"}, model="any-name-works")
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "tiny"
    assert len(r.choices) == 1 and r.choices[0].index == 0
    m = r.choices[0].message
    assert m.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == prompt_token_count(req), (r.usage, prompt_token_count(req))
    assert r.usage.completion_tokens <= 6 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens >= 0
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 6
    # thinking is on by default: the output starts as reasoning
    assert getattr(m, "reasoning_content", None) is not None or m.content is not None


@test
def usage_matches_render_with_tools_and_kwargs():
    c = S["main"].client()
    cases = [
        {"messages": [user("weather?")], "tools": TOOLS},
        {"messages": [SYSTEM, user("weather?")], "tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False}},
        {"messages": [SYSTEM, user("a"), {"role": "assistant", "content": "b", "reasoning_content": "r"}, user("c")],
         "chat_template_kwargs": {"preserve_thinking": True}},
    ]
    for req in cases:
        kw = {k: v for k, v in req.items() if k not in ("messages", "chat_template_kwargs")}
        if "chat_template_kwargs" in req:
            kw["extra_body"] = {"chat_template_kwargs": req["chat_template_kwargs"]}
        r = chat(c, req["messages"], max_tokens=2, **kw)
        assert r.usage.prompt_tokens == prompt_token_count(req), req
    # enable_thinking false: the prompt closes the think block, nothing is reasoning
    r = chat(c, [user("hi")], max_tokens=6, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert getattr(r.choices[0].message, "reasoning_content", None) is None
    # developer is system
    a = chat(c, [{"role": "developer", "content": "Be brief."}, user("x")], max_tokens=1)
    b = chat(c, [{"role": "system", "content": "Be brief."}, user("x")], max_tokens=1)
    assert a.usage.prompt_tokens == b.usage.prompt_tokens


@test
def stream_equals_non_stream():
    c = S["main"].client()
    assert_stream_equals(c, [user("Tell me a story")], max_tokens=12)
    assert_stream_equals(c, [SYSTEM, user("weather in Paris?")], tools=TOOLS, max_tokens=12)
    assert_stream_equals(c, [user("no thinking")], max_tokens=12,
                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert_stream_equals(c, [user("logprobs please")], max_tokens=6, logprobs=True, top_logprobs=3)
    assert_stream_equals(c, [user("sampled")], max_tokens=10, temperature=0.9, seed=7, top_p=0.9)


@test
def sse_framing_with_curl():
    srv = S["main"]
    body = json.dumps({"model": "tiny", "messages": [user("sse")], "max_tokens": 5, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    rc, out, err = curl("-N", "-i", "-H", f"Authorization: Bearer {KEY}", "-H", "Content-Type: application/json",
                        "-d", body, srv.url + "/v1/chat/completions")
    assert rc == 0, err
    head, _, events = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert re.search(rb"(?i)content-type: text/event-stream", head), head
    assert events.endswith(b"data: [DONE]\n\n"), events[-80:]
    # ": keep-alive" comments may come while the request waits; clients skip them
    frames = [f for f in events.split(b"\n\n") if not f.startswith(b":")]
    assert frames[-1] == b"" and frames[-2] == b"data: [DONE]"
    objs = []
    for f in frames[:-2]:
        assert f.startswith(b"data: ") and b"\n" not in f, f
        objs.append(json.loads(f[6:]))
    assert objs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({o["id"] for o in objs}) == 1 and all(o["object"] == "chat.completion.chunk" for o in objs)
    fin = [o for o in objs if o["choices"] and o["choices"][0]["finish_reason"]]
    assert len(fin) == 1 and fin[0] is objs[-2]
    assert objs[-1]["choices"] == [] and objs[-1]["usage"]["completion_tokens"] <= 5
    assert all(o.get("usage", None) is None for o in objs[:-1])
    # completions stream framing
    body = json.dumps({"prompt": "abc", "max_tokens": 4, "temperature": 0, "stream": True})
    rc, out, _ = curl("-N", "-H", f"Authorization: Bearer {KEY}", "-d", body, srv.url + "/v1/completions")
    frames = [f for f in out.split(b"\n\n") if not f.startswith(b":")]
    assert frames[-2] == b"data: [DONE]" and all(json.loads(f[6:])["object"] == "text_completion" for f in frames[:-2])


@test
def seeds_and_sampling_fields():
    c = S["main"].client()
    msgs = [user("random words")]
    kw = dict(temperature=1.0, max_tokens=12, top_p=1.0)
    a = chat(c, msgs, seed=1234, **kw)
    b = chat(c, msgs, seed=1234, **kw)
    d = chat(c, msgs, seed=4321, **kw)
    e1 = chat(c, msgs, **kw)
    e2 = chat(c, msgs, **kw)
    txt = lambda r: (getattr(r.choices[0].message, "reasoning_content", None), r.choices[0].message.content)
    assert txt(a) == txt(b), "same seed, same output"
    assert txt(a) != txt(d), "another seed, another output"
    assert txt(e1) != txt(e2), "no seed: a fresh random stream each time"
    # every sampling field is accepted and used
    full = dict(temperature=0.7, top_p=0.9, seed=5, presence_penalty=0.5, frequency_penalty=0.3, max_tokens=10,
                extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.2})
    x, y = chat(c, msgs, **full), chat(c, msgs, **full)
    assert txt(x) == txt(y)
    full["extra_body"] = {"top_k": 1}  # top_k 1 is greedy whatever the temperature
    g1 = chat(c, msgs, **full)
    g0 = chat(c, msgs, temperature=0, max_tokens=10)
    assert txt(g1) == txt(g0)
    # max_completion_tokens is max_tokens
    r = c.chat.completions.create(model="tiny", messages=msgs, temperature=0, max_completion_tokens=3,
                                  extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"


@test
def stop_strings():
    c = S["main"].client()
    prompt = "The quick brown fox"
    base = c.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0,
                                extra_body={"ignore_eos": True})
    text = base.choices[0].text
    assert len(text) >= 8, text
    for stop in (text[3:6], [text[5:7], "zzzzzz-not-there"], text[-2:]):
        first = min((text.find(s) for s in ([stop] if isinstance(stop, str) else stop) if s in text))
        r = c.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop=stop,
                                 extra_body={"ignore_eos": True})
        assert r.choices[0].text == text[:first], (stop, r.choices[0].text, text)
        assert r.choices[0].finish_reason == "stop"
        parts = [ch.choices[0].text for ch in c.completions.create(
            model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop=stop, stream=True,
            extra_body={"ignore_eos": True}) if ch.choices]
        assert "".join(parts) == text[:first], (parts, text[:first])
    # a stop string that never occurs changes nothing
    r = c.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop="\x01never\x02",
                             extra_body={"ignore_eos": True})
    assert r.choices[0].text == text and r.choices[0].finish_reason == "length"
    # chat: the stop string is cut from the reasoning/content as well
    full = chat(c, [user("stop test")], max_tokens=16, extra_body={"ignore_eos": True})
    out = (getattr(full.choices[0].message, "reasoning_content", None) or "") + (full.choices[0].message.content or "")
    if len(out) > 6:
        st = out[4:6]
        r = assert_stream_equals(c, [user("stop test")], max_tokens=16, stop=st, extra_body={"ignore_eos": True})
        got = (getattr(r.choices[0].message, "reasoning_content", None) or "") + (r.choices[0].message.content or "")
        assert st not in got and r.choices[0].finish_reason == "stop"


@test
def logprobs_shapes():
    c = S["main"].client()
    r = chat(c, [user("lp")], max_tokens=5, logprobs=True, top_logprobs=4)
    lp = r.choices[0].logprobs.content
    assert len(lp) == r.usage.completion_tokens
    for x in lp:
        assert x.logprob <= 0 and len(x.top_logprobs) == 4 and isinstance(x.bytes, list)
        # greedy: the chosen token is the most likely one
        assert x.top_logprobs[0].logprob == x.logprob
        assert all(a.logprob >= b.logprob for a, b in zip(x.top_logprobs, x.top_logprobs[1:]))
        try:
            assert bytes(x.bytes).decode("utf-8") == x.token
        except UnicodeDecodeError:
            pass  # a token that is part of a character: its text is repaired, its bytes are exact
    r = chat(c, [user("lp")], max_tokens=3, logprobs=True)
    assert all(x.top_logprobs == [] for x in r.choices[0].logprobs.content)
    r = c.completions.create(model="tiny", prompt="abc", max_tokens=4, temperature=0, logprobs=2)
    L = r.choices[0].logprobs
    assert len(L.tokens) == len(L.token_logprobs) == len(L.top_logprobs) == len(L.text_offset) == 4
    assert all(1 <= len(t) <= 2 for t in L.top_logprobs) and L.text_offset == sorted(L.text_offset)


@test
def completions_endpoint():
    c = S["main"].client()
    r = c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.choices[0].finish_reason in ("stop", "length")
    ids = json.loads(subprocess.run([LILAC, "tokenize", "--model", TINY, "Once upon a time"], capture_output=True,
                                    check=True).stdout)
    assert r.usage.prompt_tokens == len(ids)
    r2 = c.completions.create(model="tiny", prompt=ids, max_tokens=8, temperature=0)
    assert r2.choices[0].text == r.choices[0].text
    r3 = c.completions.create(model="tiny", prompt=[ids], max_tokens=8, temperature=0)
    assert r3.choices[0].text == r.choices[0].text
    parts = [ch.choices[0].text for ch in c.completions.create(model="tiny", prompt="Once upon a time", max_tokens=8,
                                                               temperature=0, stream=True) if ch.choices]
    assert "".join(parts) == r.choices[0].text
    d = c.completions.create(model="tiny", prompt="x")  # default max_tokens is 16, as OpenAI's
    assert d.usage.completion_tokens <= 16


@test
def bad_requests():
    srv = S["main"]
    P = "/v1/chat/completions"
    ok = {"model": "tiny", "messages": [user("x")], "max_tokens": 1}
    cases = [
        ({**ok, "n": 2}, "n"), ({**ok, "temperature": "hot"}, "temperature"), ({**ok, "temperature": 3}, "temperature"),
        ({**ok, "top_p": 0}, "top_p"), ({**ok, "top_k": -2}, "top_k"), ({**ok, "min_p": 1.5}, "min_p"),
        ({**ok, "presence_penalty": 9}, "presence_penalty"), ({**ok, "repetition_penalty": 0}, "repetition_penalty"),
        ({**ok, "max_tokens": 0}, "max_tokens"), ({**ok, "max_tokens": "5"}, "max_tokens"),
        ({**ok, "seed": 1.5}, "seed"), ({**ok, "stop": 5}, "stop"), ({**ok, "stop": [""]}, "stop"),
        ({**ok, "stop": ["a"] * 17}, "stop"), ({**ok, "logprobs": "yes"}, "logprobs"),
        ({**ok, "top_logprobs": 3}, "top_logprobs"), ({**ok, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({**ok, "stream": "yes"}, "stream"), ({**ok, "stream_options": {"include_usage": True}}, "stream_options"),
        ({**ok, "tools": {}}, "tools"), ({**ok, "tools": [{"type": "function"}]}, "tools"),
        ({**ok, "tool_choice": "required"}, "tool_choice"), ({**ok, "tool_choice": "sometimes", "tools": TOOLS}, "tool_choice"),
        ({**ok, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({**ok, "response_format": {"type": "yaml"}}, "response_format"),
        ({**ok, "response_format": {"type": "json_schema", "json_schema": {"schema": {"pattern": "x"}}}}, "response_format"),
        ({**ok, "logit_bias": {"1": 5}}, "logit_bias"), ({**ok, "model": 5}, "model"),
        ({**ok, "chat_template_kwargs": []}, "chat_template_kwargs"),
        ({**ok, "chat_template_kwargs": {"enable_thinking": "no"}}, "chat_template_kwargs.enable_thinking"),
        ({**ok, "chat_template_kwargs": {"preserve_thinking": 1}}, "chat_template_kwargs.preserve_thinking"),
        ({**ok, "chat_template_kwargs": {"add_generation_prompt": "yes"}}, "chat_template_kwargs.add_generation_prompt"),
        ({**ok, "functions": [{"name": "f", "parameters": {"type": "object"}}]}, "functions"),
        ({**ok, "function_call": "auto"}, "function_call"), ({**ok, "echo": True}, "echo"),
        ({"model": "tiny"}, "messages"), ({**ok, "messages": "hi"}, "messages"), ({**ok, "messages": []}, "messages"),
        ({**ok, "messages": [5]}, "messages"), ({**ok, "messages": [{"role": "user"}, 3]}, "messages"),
    ]
    for body, param in cases:
        st, _, data = raw(srv, "POST", P, body=body)
        err = json.loads(data)["error"]
        assert st == 400 and err["param"] == param and err["type"] == "invalid_request_error", (body, st, err)
        assert err["message"], body
    # template errors: a well-formed request the template refuses
    for msgs, text in (([SYSTEM], "No user query found"), ([user("a"), SYSTEM], "System message must be at the beginning"),
                       ([{"role": "wizard", "content": "x"}], "")):
        st, _, data = raw(srv, "POST", P, body={**ok, "messages": msgs})
        err = json.loads(data)["error"]
        assert st == 400 and text in err["message"], (msgs, err)
    # context: 4096 tokens
    st, _, data = raw(srv, "POST", P, body={**ok, "max_tokens": 5000})
    err = json.loads(data)["error"]
    assert st == 400 and err["code"] == "context_length_exceeded", err
    st, _, data = raw(srv, "POST", P, body={**ok, "messages": [user("x " * 5000)]})
    assert st == 400 and json.loads(data)["error"]["code"] == "context_length_exceeded", data
    st, _, data = raw(srv, "POST", "/v1/completions", body={"prompt": [7] * 4096, "max_tokens": 1})
    assert st == 400 and json.loads(data)["error"]["code"] == "context_length_exceeded"
    st, _, data = raw(srv, "POST", "/v1/completions", body={"prompt": [7], "max_tokens": 5000})
    err = json.loads(data)["error"]
    assert st == 400 and err["param"] == "prompt" and "(1 in the prompt, 5000 in the completion)" in err["message"], err
    assert "messages" not in err["message"], err
    for body, param in (({"prompt": "a", "echo": True}, "echo"), ({"prompt": ["a", "b"]}, "prompt"),
                        ({"prompt": [1, 600]}, "prompt"), ({"prompt": ""}, "prompt"), ({"prompt": 3}, "prompt"),
                        ({"prompt": "a", "logprobs": 30}, "logprobs"), ({"prompt": "a", "suffix": "b"}, "suffix")):
        st, _, data = raw(srv, "POST", "/v1/completions", body=body)
        assert st == 400 and json.loads(data)["error"]["param"] == param, (body, data)
    # the openai client raises BadRequestError with the message
    try:
        chat(srv.client(), [user("x")], n=3)
        raise AssertionError("n=3 accepted")
    except openai.BadRequestError as e:
        assert "n = 1" in e.message


@test
def media_parts_refused():
    """Image, video, audio and file parts: 400 naming the part (no vision tower is loaded)."""
    srv = S["main"]
    text = {"type": "text", "text": "what is this?"}
    parts = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image", "image": "http://example.com/a.png"},
        {"image_url": {"url": "http://example.com/a.png"}},  # no type: still an image to the template
        {"type": "video", "video": "http://example.com/a.mp4"},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "f"}},
        {"type": "image_url", "image_url": {"url": "x"}, "text": "also text"},
    ]
    for part in parts:
        msgs = [SYSTEM, {"role": "user", "content": [text, part]}]
        st, _, data = raw(srv, "POST", "/v1/chat/completions", body={"messages": msgs, "max_tokens": 1})
        err = json.loads(data)["error"]
        assert st == 400 and err["param"] == "messages[1].content[1].type", (part, st, err)
        assert "not supported" in err["message"] and err["type"] == "invalid_request_error", err
    # the openai client's image message: BadRequestError
    try:
        chat(srv.client(), [{"role": "user", "content": [text, parts[0]]}])
        raise AssertionError("an image was accepted")
    except openai.BadRequestError as e:
        assert "messages[0].content[1].type" in e.message
    # text parts (with or without "type") still work
    r = chat(srv.client(), [{"role": "user", "content": [text, {"text": " and this"}]}], max_tokens=1)
    assert r.choices[0].finish_reason in ("stop", "length")


@test
def malformed_bodies():
    srv = S["main"]
    P = "/v1/chat/completions"
    bodies = [
        b"", b"{", b"not json", b"[1,2,3]", b'"a string"', b"null", b'{"messages": [}',
        b'{"messages": [{"role": "user", "content": "\xff\xfe bad utf-8"}]}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 123456789012345678901234567890}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 9223372036854775807}',
        b'{"messages": [{"role": "user", "content": "x"}], "temperature": -1e308}',
        b"[" * 100000 + b"]" * 100000,
        b'{"a":' * 50000 + b"1" + b"}" * 50000,
        b'{"messages": [{"role": "user", "content": "a\\u0000b"}], "max_tokens": 1}',  # NUL is valid JSON: 200
        b'{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 1}',  # lone surrogate
    ]
    for b in bodies:
        st, _, data = raw(srv, "POST", P, body=b)
        if b.startswith(b'{"messages": [{"role": "user", "content": "a\\u0000b"}]'):
            assert st == 200, (st, data)
            continue
        assert 400 <= st < 500, (b[:60], st, data[:200])
        json.loads(data)["error"]["message"]
    # a 100 MB body: 413, whether the size is announced or chunked
    big = os.path.join(TMP, "big.bin")
    with open(big, "wb") as f:
        f.truncate(100 * 1024 * 1024)
    for extra in ([], ["-H", "Expect:"], ["-H", "Transfer-Encoding: chunked"]):
        rc, out, err = curl("-o", "/dev/null", "-w", "%{http_code}", "-H", f"Authorization: Bearer {KEY}", *extra,
                            "--data-binary", "@" + big, srv.url + P)
        assert out.endswith(b"413"), (extra, rc, out, err)
    assert health(srv)["status"] == "ok"
    chat(srv.client(), [user("still alive?")], max_tokens=2)


@test
def multi_turn_cache_matches_uncached():
    cached, plain = S["main"].client(), S["plain"].client()
    convo = [SYSTEM, user("Plan a trip to Rome.")]
    seen_hits = 0
    for turn in range(3):
        a = chat(cached, convo, tools=TOOLS, max_tokens=10)
        b = chat(plain, convo, tools=TOOLS, max_tokens=10)
        assert message_of(a) == message_of(b), (turn, message_of(a), message_of(b))
        assert a.choices[0].finish_reason == b.choices[0].finish_reason
        assert a.usage.prompt_tokens == b.usage.prompt_tokens
        assert b.usage.prompt_tokens_details.cached_tokens == 0
        if turn > 0:
            assert a.usage.prompt_tokens_details.cached_tokens > 0, a.usage
            seen_hits += 1
        convo += [message_of(a)]
        if turn == 0:  # a tool-calling loop: a tool result after the assistant turn
            convo += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 25C"}]
        else:
            convo += [user(f"And on day {turn + 2}?")]
    # the same request again: everything is reused, and the answer is the same
    a1 = chat(cached, convo, tools=TOOLS, max_tokens=10)
    a2 = chat(cached, convo, tools=TOOLS, max_tokens=10)
    assert message_of(a1) == message_of(a2)
    assert a2.usage.prompt_tokens_details.cached_tokens == a2.usage.prompt_tokens
    # a new conversation with the same system prompt and tools reuses the system turn
    n = chat(cached, [SYSTEM, user("Something else entirely")], tools=TOOLS, max_tokens=2)
    system_turn = prompt_token_count({"messages": [SYSTEM, user("x")], "tools": TOOLS}, upto=b"<|im_start|>user")
    assert n.usage.prompt_tokens_details.cached_tokens >= system_turn, (n.usage, system_turn)
    # completions: prompt + completion as the next prompt continues from the cache
    c1 = cached.completions.create(model="tiny", prompt="Continue this:", max_tokens=6, temperature=0,
                                   extra_body={"ignore_eos": True})
    tok = lambda t: json.loads(subprocess.run([LILAC, "tokenize", "--model", TINY, t], capture_output=True,
                                              check=True).stdout)
    ids = tok("Continue this:")
    p2_text = "Continue this:" + c1.choices[0].text
    c2 = cached.completions.create(model="tiny", prompt=p2_text, max_tokens=4, temperature=0,
                                   extra_body={"ignore_eos": True})
    p2 = plain.completions.create(model="tiny", prompt=p2_text, max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert c2.choices[0].text == p2.choices[0].text
    if tok(p2_text)[:len(ids)] == ids:  # unless BPE merges across the join
        assert c2.usage.prompt_tokens_details.cached_tokens >= len(ids)
    h = health(S["main"])["cache"]
    assert h["hits"] > 0 and h["cached_tokens"] > 0


@test
def concurrent_clients():
    srv = S["main"]
    prompts = [f"client {i} says hello" for i in range(16)]
    expected = [message_of(chat(S["plain"].client(), [user(p)], max_tokens=4)) for p in prompts]
    results = [None] * 16
    barrier = threading.Barrier(16)

    def worker(i):
        c = srv.client()
        barrier.wait()
        try:
            results[i] = ("ok", message_of(chat(c, [user(prompts[i])], max_tokens=4)))
        except openai.RateLimitError as e:
            results[i] = ("429", e.response.headers.get("retry-after"), e.body)
        except Exception as e:  # noqa: BLE001
            results[i] = ("error", repr(e))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    oks = 0
    for i, r in enumerate(results):
        if r[0] == "ok":
            assert r[1] == expected[i], (i, r[1], expected[i])
            oks += 1
        else:
            assert r[0] == "429" and r[1] is not None and int(r[1]) >= 1, r
            assert r[2]["code"] == "rate_limit_exceeded", r
    assert oks >= 5, results  # one running + a queue of 4
    h = health(srv)
    assert h["status"] == "ok" and h["queue"]["waiting"] == 0
    assert message_of(chat(srv.client(), [user(prompts[0])], max_tokens=4)) == expected[0]


def wait_idle(srv, seconds):
    t0 = time.time()
    while time.time() - t0 < seconds:
        h = health(srv)
        if not h["queue"]["running"] and h["queue"]["waiting"] == 0:
            return time.time() - t0
        time.sleep(0.05)
    raise AssertionError(f"the engine is still busy after {seconds} s: {health(srv)}")


@test
def disconnect_cancels():
    srv = S["main"]
    before = health(srv)["requests"]["cancelled"]
    # streaming: read a few chunks of a long generation, then hang up
    s = srv.client().chat.completions.create(model="tiny", messages=[user("a long story")], max_tokens=3000,
                                             stream=True, extra_body={"ignore_eos": True})
    it = iter(s)
    for _ in range(3):
        next(it)
    s.response.close()
    wait_idle(srv, 30)
    # non-streaming: send, wait until it runs, close the socket
    sock = raw_long_request(srv)
    t0 = time.time()
    while not health(srv)["queue"]["running"] and time.time() - t0 < 30:
        time.sleep(0.05)
    sock.close()
    wait_idle(srv, 30)
    assert health(srv)["requests"]["cancelled"] >= before + 2
    t0 = time.time()
    chat(srv.client(), [user("next one")], max_tokens=2)
    assert time.time() - t0 < 30


def read_http_response(sock, timeout=120):
    """Reads one HTTP/1.1 response to EOF from a raw socket, skipping 1xx
    interim responses (which a client must accept, RFC 9110 15.2): (status, headers, body)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        b = sock.recv(65536)
        if not b:
            break
        data += b
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, data[:200]
        status = int(head.split(b" ", 2)[1])
        if 100 <= status < 200:
            data = rest
            continue
        hd = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            hd[k.strip().lower().decode()] = v.strip().decode()
        if hd.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                if n == 0:
                    break
                body += rest[:n]
                assert rest[n:n + 2] == b"\r\n", rest[n:n + 10]
                rest = rest[n + 2:]
            rest = body
        return status, hd, rest


def raw_request(srv, body, version=b"HTTP/1.1"):
    sock = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps(body).encode()
    auth = b"Authorization: Bearer " + srv.key.encode() + b"\r\n" if srv.key else b""
    sock.sendall(b"POST /v1/chat/completions " + version + b"\r\nHost: x\r\n" + auth + b"Connection: close\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


@test
def half_closed_client_gets_its_answer():
    """shutdown(SHUT_WR) after the body is a half-close, not a disconnect: the answer still comes."""
    srv = S["main"]
    before = health(srv)["requests"]["cancelled"]
    req = {"messages": [user("half close")], "max_tokens": 200, "temperature": 0, "ignore_eos": True}
    want = json.loads(raw(srv, "POST", "/v1/chat/completions", body=req)[2])
    sock = raw_request(srv, req)
    sock.shutdown(socket.SHUT_WR)
    st, hd, body = read_http_response(sock)
    sock.close()
    assert st == 200, (st, body[:300])
    got = json.loads(body)
    assert got["choices"][0]["message"] == want["choices"][0]["message"], (got, want)
    assert got["usage"]["completion_tokens"] == 200
    # streaming, half-closed: the whole stream
    sock = raw_request(srv, {**req, "stream": True})
    sock.shutdown(socket.SHUT_WR)
    st, hd, body = read_http_response(sock)
    sock.close()
    assert st == 200 and hd["content-type"].startswith("text/event-stream"), (st, hd)
    text = body.decode()
    assert text.rstrip().endswith("data: [DONE]"), text[-300:]
    content = ""
    for line in text.split("\n"):
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                content += (ch["delta"].get("reasoning_content") or "") + (ch["delta"].get("content") or "")
    m = want["choices"][0]["message"]
    assert content == (m.get("reasoning_content") or "") + (m.get("content") or ""), (content, m)
    assert health(srv)["requests"]["cancelled"] == before


@test
def disconnect_logs_one_calm_line():
    srv = Server("calm", "--ctx", "4096", quiet=False)
    try:
        for stream in (False, True):
            n0 = len(srv.read_log())
            sock = raw_request(srv, {"messages": [user("long")], "max_tokens": 3000, "ignore_eos": True,
                                     "stream": stream})
            t0 = time.time()
            while not health(srv)["queue"]["running"] and time.time() - t0 < 30:
                time.sleep(0.05)
            if stream:
                sock.recv(100)
            sock.close()
            wait_idle(srv, 30)
            time.sleep(0.3)
            log = srv.read_log()[n0:]
            lines = [l for l in log.splitlines() if "/health" not in l]
            assert sum("cancelled: client closed" in l for l in lines) == 1, log
            assert "internal error" not in log and "application error" not in log.lower(), log
    finally:
        assert srv.stop() == 0


@test
def tool_choice_values():
    c = S["main"].client()
    msgs = [SYSTEM, user("What's the weather in Oslo?")]
    for tc in ("auto", "none", "required", {"type": "function", "function": {"name": "add"}}):
        r = assert_stream_equals(c, msgs, tools=TOOLS, tool_choice=tc, max_tokens=8, n=1, parallel_tool_calls=True)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
        if tc == "none":
            assert not r.choices[0].message.tool_calls
    # a conversation that went through a tool call renders and runs
    msgs += [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "days": 2}'}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": '{"temp": -3}'}]
    r = chat(c, msgs, tools=TOOLS, max_tokens=4)
    assert r.usage.prompt_tokens == prompt_token_count({"messages": msgs, "tools": TOOLS})


def raw_long_request(srv, max_tokens=3000):
    """A non-streaming request on a bare socket (closed by the caller)."""
    sock = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps({"messages": [user("long")], "max_tokens": max_tokens, "ignore_eos": True}).encode()
    auth = b"Authorization: Bearer " + srv.key.encode() + b"\r\n" if srv.key else b""
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                 b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


@test
def queued_stream_outlives_idle_timeout():
    srv = Server("timeout", "--ctx", "4096", "--timeout", "2")
    try:
        sock = raw_long_request(srv)
        t0 = time.time()
        while not health(srv)["queue"]["running"] and time.time() - t0 < 30:
            time.sleep(0.05)
        got = {}

        def streamer():
            s = srv.client().chat.completions.create(model="tiny", messages=[user("queued")], max_tokens=3,
                                                     stream=True)
            got["r"] = collect_stream(s)

        t = threading.Thread(target=streamer)
        t.start()
        time.sleep(3.5)  # waits in the queue longer than the idle timeout
        sock.close()
        t.join(120)
        assert "r" in got and got["r"][4] in ("length", "stop"), got
    finally:
        assert srv.stop() == 0


@test
def shutdown_is_clean():
    srv = Server("shutdown", "--ctx", "8192")
    c = srv.client()
    got = {}

    def streamer():
        try:
            s = c.chat.completions.create(model="tiny", messages=[user("long")], max_tokens=5000, stream=True,
                                          extra_body={"ignore_eos": True})
            n = 0
            for ch in s:
                n += 1
            got["stream"] = ("ended", n)
        except Exception as e:  # noqa: BLE001
            got["stream"] = ("error", repr(e))

    def waiter():
        try:
            chat(c, [user("queued")], max_tokens=5)
            got["wait"] = ("ok",)
        except openai.APIStatusError as e:
            got["wait"] = ("status", e.status_code)
        except Exception as e:  # noqa: BLE001
            got["wait"] = ("error", repr(e))

    t1 = threading.Thread(target=streamer)
    t1.start()
    t0 = time.time()
    while not health(srv)["queue"]["running"] and time.time() - t0 < 30:
        time.sleep(0.05)
    t2 = threading.Thread(target=waiter)
    t2.start()
    while health(srv)["queue"]["waiting"] == 0 and time.time() - t0 < 30:
        time.sleep(0.05)
    rc = srv.stop(timeout=120)
    t1.join(60)
    t2.join(60)
    assert rc == 0, (rc, srv.read_log()[-3000:])
    assert got.get("wait") == ("status", 503), got
    assert "stream" in got, got
    assert "stopped" in srv.read_log()


# ------------------------------------------------------- other modules

# Test modules beside this one import it as `test_server` and register their
# tests with @test; run as a script, this module is __main__, so it is
# entered under its name first (one module, one TESTS list, one S).
sys.modules.setdefault("test_server", sys.modules[__name__])
import test_anthropic  # noqa: E402,F401  (Anthropic Messages API)
import test_metrics  # noqa: E402,F401  (GET /metrics)
import test_web  # noqa: E402,F401  (the web chat page, in Chromium)
import test_agent  # noqa: E402,F401  (thinking budget, prefix cache on edited histories)
import test_persist  # noqa: E402,F401  (--cache-dir: snapshots across restarts)
import test_grammar  # noqa: E402,F401  (constrained decoding: response_format, tool_choice)
import test_tiers  # noqa: E402,F401  (--cache-ram: snapshots evicted from the slots, in RAM then on disk)

# ------------------------------------------------------------------ main


def main():
    global LILAC
    ap = argparse.ArgumentParser()
    ap.add_argument("--lilac", default=os.environ.get("LILAC", "./lilac"))
    ap.add_argument("tests", nargs="*")
    a = ap.parse_args()
    LILAC = a.lilac
    t_start = time.time()
    selected = [t for t in TESTS if not a.tests or t.__name__ in a.tests]
    passed, failed = 0, []
    try:
        S["main"] = Server("main", "--ctx", "4096", "--queue", "4", "--slots", "8")
        S["plain"] = Server("plain", "--ctx", "4096", "--slots", "0", key=None)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: cannot start the servers: {e}")
        print("0 passed, 1 failed")
        return 1
    for t in selected:
        t0 = time.time()
        try:
            t()
            passed += 1
            print(f"  ok   {t.__name__} ({time.time() - t0:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001
            failed.append(t.__name__)
            print(f"  FAIL {t.__name__} ({time.time() - t0:.1f} s)", flush=True)
            traceback.print_exc()
    for name, srv in S.items():
        rc = srv.stop()
        if rc != 0:
            failed.append(f"exit:{name}")
            print(f"  FAIL server '{name}' exited with {rc}; log tail:\n{srv.read_log()[-4000:]}")
        else:
            passed += 1
            print(f"  ok   server '{name}' stopped cleanly on SIGTERM (exit 0)")
    print(f"server suite: {time.time() - t_start:.0f} s")
    print(f"{passed} passed, {len(failed)} failed" + (f": {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
