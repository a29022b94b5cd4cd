"""test_anthropic.py — POST /v1/messages and /v1/messages/count_tokens with the
official `anthropic` package (and raw HTTP for the SSE framing and for bodies
the client would not send).  Registered into test_server.py's list; uses its
servers (S["main"]: API key, prefix cache; S["plain"]: no key, --slots 0).

What is asserted: the message and event shapes; the stream's exact event
grammar; stream == non-stream; usage == count_tokens == the chat endpoint's
prompt_tokens == `lilac render` + `lilac tokenize` for the same conversation
(system, tools, thinking, tool_use and tool_result blocks), and the same
greedy output on both routes; stop_sequences; the thinking switch; the
prefix cache in cache_read_input_tokens; errors in Anthropic's shape; the
x-api-key header.
"""
import json

import anthropic

import test_server as T

ANTH_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
               "input_schema": t["function"]["parameters"]} for t in T.TOOLS]
SYSTEM_TEXT = T.SYSTEM["content"]

# One conversation in both APIs' terms: a question, an assistant turn with
# thinking, text and a tool call, then the tool's result and a new question
# in one user message.
ANTH_CONV = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should call the tool.", "signature": ""},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris", "days": 2}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "Sunny, 21 C"}]},
        {"type": "text", "text": "And add 2 and 3."}]},
]
OAI_CONV = [
    T.SYSTEM,
    T.user("What is the weather in Paris?"),
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "I should call the tool.",
     "tool_calls": [{"id": "toolu_01", "type": "function",
                     "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 2})}}]},
    {"role": "tool", "tool_call_id": "toolu_01", "content": "Sunny, 21 C"},
    T.user("And add 2 and 3."),
]


def client(srv, key=None):
    return anthropic.Anthropic(base_url=srv.url, api_key=key or srv.key or "none", max_retries=0, timeout=600)


def create(c, messages, **kw):
    """messages.create, greedy (the SDK no longer has temperature: it goes in the body)."""
    kw.setdefault("max_tokens", 8)
    kw.setdefault("model", "tiny")
    eb = dict(kw.pop("extra_body", {}))
    eb.setdefault("temperature", 0)
    return c.messages.create(messages=messages, extra_body=eb, **kw)


def blocks_of(msg):
    return [b.model_dump(exclude_none=True) for b in msg.content]


def text_of(msg, kind):
    return "".join(getattr(b, "thinking" if kind == "thinking" else "text") for b in msg.content if b.type == kind)


def raw_events(srv, body):
    """(event name, data) pairs of a raw /v1/messages stream, with the framing checked."""
    st, hd, data = T.raw(srv, "POST", "/v1/messages", body=dict(body, stream=True))
    assert st == 200 and hd["content-type"].startswith("text/event-stream"), (st, data[:300])
    out = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip() or frame.startswith(":"):
            continue
        lines = frame.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        name, ev = lines[0][7:], json.loads(lines[1][6:])
        assert ev["type"] == name, (name, ev)
        out.append((name, ev))
    return out


def check_grammar(events):
    """message_start ping (block_start delta* block_stop)* message_delta message_stop, indices in order,
    deltas of the block's kind.  Returns the blocks the deltas build."""
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"], names
    start = events[0][1]["message"]
    assert start["type"] == "message" and start["role"] == "assistant" and start["content"] == []
    assert start["stop_reason"] is None and start["id"].startswith("msg_")
    blocks, open_ = [], None
    want = {"thinking": "thinking_delta", "text": "text_delta", "tool_use": "input_json_delta"}
    for name, ev in events[2:-2]:
        if name == "content_block_start":
            assert open_ is None and ev["index"] == len(blocks), ev
            open_ = dict(ev["content_block"])
            if open_["type"] == "tool_use":
                open_["json"] = ""
        elif name == "content_block_delta":
            assert open_ is not None and ev["index"] == len(blocks)
            d = ev["delta"]
            assert d["type"] == want[open_["type"]], (open_, d)
            key = {"thinking_delta": "thinking", "text_delta": "text", "input_json_delta": "partial_json"}[d["type"]]
            open_["json" if key == "partial_json" else key] += d[key]
        elif name == "content_block_stop":
            assert open_ is not None and ev["index"] == len(blocks)
            if open_["type"] == "tool_use":
                open_["input"] = json.loads(open_.pop("json"))
            blocks.append(open_)
            open_ = None
        else:
            raise AssertionError(f"unexpected event {name} inside the message")
    assert open_ is None
    md = events[-2][1]
    assert md["delta"]["stop_reason"] in ("end_turn", "max_tokens", "stop_sequence", "tool_use"), md
    assert set(md["usage"]) >= {"output_tokens", "input_tokens", "cache_read_input_tokens"}
    return blocks, start, md


@T.test
def anthropic_same_prompt_as_chat():
    srv = S()["plain"]
    a = client(srv)
    kw = dict(system=SYSTEM_TEXT, tools=ANTH_TOOLS, max_tokens=12)
    r = create(a, ANTH_CONV, **kw)
    assert r.type == "message" and r.role == "assistant" and r.model == "tiny" and r.id.startswith("msg_")
    assert r.stop_reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use") and r.stop_sequence is None
    assert {b.type for b in r.content} <= {"thinking", "text", "tool_use"}
    n = a.messages.count_tokens(model="tiny", messages=ANTH_CONV, system=SYSTEM_TEXT, tools=ANTH_TOOLS).input_tokens
    o = T.chat(srv.client(), OAI_CONV, tools=T.TOOLS, max_tokens=12)
    want = T.prompt_token_count({"messages": OAI_CONV, "tools": T.TOOLS})
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens == n == o.usage.prompt_tokens == want, (
        r.usage, n, o.usage, want)
    assert r.usage.cache_read_input_tokens == 0 and r.usage.cache_creation_input_tokens == 0  # --slots 0
    assert r.usage.output_tokens == o.usage.completion_tokens
    m = o.choices[0].message
    assert text_of(r, "thinking") == (m.reasoning_content or ""), (blocks_of(r), m)
    assert text_of(r, "text") == (m.content or ""), (blocks_of(r), m)
    # thinking disabled == enable_thinking false; enabled (with a budget) == the default
    for thinking, kwargs in (({"type": "disabled"}, {"enable_thinking": False}),
                             ({"type": "enabled", "budget_tokens": 2048}, {"enable_thinking": True})):
        r = create(a, ANTH_CONV, thinking=thinking, **kw)
        o = T.chat(srv.client(), OAI_CONV, tools=T.TOOLS, max_tokens=12, extra_body={"chat_template_kwargs": kwargs})
        assert r.usage.input_tokens == o.usage.prompt_tokens == T.prompt_token_count(
            {"messages": OAI_CONV, "tools": T.TOOLS, "chat_template_kwargs": kwargs})
        assert text_of(r, "text") == (o.choices[0].message.content or "")
        if thinking["type"] == "disabled":
            assert not [b for b in r.content if b.type == "thinking"], blocks_of(r)
    # a system prompt as text blocks is the same as the string; metadata is ignored
    r2 = create(a, ANTH_CONV, system=[{"type": "text", "text": SYSTEM_TEXT}], tools=ANTH_TOOLS, max_tokens=12,
                metadata={"user_id": "someone"})
    r1 = create(a, ANTH_CONV, **kw)
    assert blocks_of(r1) == blocks_of(r2) and r1.usage.input_tokens == r2.usage.input_tokens


@T.test
def anthropic_stream_events_and_equality():
    srv = S()["main"]
    a = client(srv)
    body = {"model": "tiny", "max_tokens": 16, "temperature": 0, "system": SYSTEM_TEXT, "tools": ANTH_TOOLS,
            "messages": [{"role": "user", "content": "Tell me about streams."}]}
    events = raw_events(srv, body)
    blocks, start, md = check_grammar(events)
    non = create(a, body["messages"], system=SYSTEM_TEXT, tools=ANTH_TOOLS, max_tokens=16)
    assert blocks == blocks_of(non), (blocks, blocks_of(non))
    assert md["delta"]["stop_reason"] == non.stop_reason and md["usage"]["output_tokens"] == non.usage.output_tokens
    total = start["usage"]["input_tokens"] + start["usage"]["cache_read_input_tokens"]
    assert total == non.usage.input_tokens + non.usage.cache_read_input_tokens
    # the same request again: the prefix cache serves the prompt, and usage says so
    again = raw_events(srv, body)
    u = again[0][1]["message"]["usage"]
    assert u["cache_read_input_tokens"] > 0 and u["input_tokens"] + u["cache_read_input_tokens"] == total, u
    assert check_grammar(again)[0] == blocks
    # the SDK's own stream helper assembles the same message
    with a.messages.stream(model="tiny", max_tokens=16, system=SYSTEM_TEXT, tools=ANTH_TOOLS,
                           messages=body["messages"], extra_body={"temperature": 0}) as s:
        types = [ev.type for ev in s]
        final = s.get_final_message()
    assert types[0] == "message_start" and "message_stop" in types
    assert blocks_of(final) == blocks_of(non) and final.stop_reason == non.stop_reason
    # create(stream=True) yields the raw events
    evs = list(create(a, body["messages"], system=SYSTEM_TEXT, max_tokens=4, stream=True))
    assert evs[0].type == "message_start" and evs[-1].type == "message_stop"


@T.test
def anthropic_stop_sequences_and_sampling():
    srv = S()["plain"]
    a = client(srv)
    msgs = [{"role": "user", "content": "Count to ten."}]
    base = create(a, msgs, max_tokens=24, thinking={"type": "disabled"})
    text = text_of(base, "text")
    cut = next((i for i in range(2, len(text) - 2) if text[i:i + 2].strip() and text.find(text[i:i + 2]) == i), None)
    assert cut is not None, text
    stop = text[cut:cut + 2]
    r = create(a, msgs, max_tokens=24, thinking={"type": "disabled"}, stop_sequences=["@@never@@", stop])
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == stop, (r, stop)
    assert text_of(r, "text") == text[:cut].strip("\n") or text[:cut].startswith(text_of(r, "text")), (r, text)
    ev = raw_events(srv, {"model": "tiny", "max_tokens": 24, "temperature": 0, "thinking": {"type": "disabled"},
                          "stop_sequences": [stop], "messages": msgs})
    assert ev[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": stop}
    r = create(a, msgs, max_tokens=3)
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 3
    # sampling fields are read (seeded by nothing: only their acceptance is checked here)
    r = create(a, msgs, max_tokens=3, extra_body={"temperature": 0.7, "top_p": 0.9, "top_k": 20})
    assert r.usage.output_tokens <= 3
    for field, value in (("temperature", 1.5), ("top_p", 0), ("top_k", -1)):
        st, _, body = T.raw(srv, "POST", "/v1/messages",
                            body={"model": "tiny", "max_tokens": 3, "messages": msgs, field: value})
        err = json.loads(body)
        assert st == 400 and err["type"] == "error" and err["error"]["type"] == "invalid_request_error", body
        assert field in err["error"]["message"], body


@T.test
def anthropic_tool_choice_values():
    srv = S()["plain"]
    a = client(srv)
    msgs = [{"role": "user", "content": "What's the weather in Oslo?"}]
    for tc in ({"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "add"}, {"type": "none"},
               {"type": "auto", "disable_parallel_tool_use": True}):
        r = create(a, msgs, tools=ANTH_TOOLS, tool_choice=tc, max_tokens=4)
        assert r.stop_reason in ("end_turn", "max_tokens", "tool_use"), (tc, r)
        if tc["type"] == "none":
            assert not [b for b in r.content if b.type == "tool_use"]
    for tc, tools in (({"type": "tool", "name": "nope"}, ANTH_TOOLS), ({"type": "any"}, None), ({"type": "maybe"}, ANTH_TOOLS)):
        body = {"model": "tiny", "max_tokens": 3, "messages": msgs, "tool_choice": tc}
        if tools:
            body["tools"] = tools
        st, _, data = T.raw(srv, "POST", "/v1/messages", body=body)
        assert st == 400 and json.loads(data)["error"]["type"] == "invalid_request_error", (tc, data)


@T.test
def anthropic_errors_and_auth():
    srv = S()["main"]
    try:
        client(srv, key="wrong").messages.create(model="tiny", max_tokens=3, messages=[{"role": "user", "content": "x"}])
        raise AssertionError("no 401")
    except anthropic.AuthenticationError as e:
        assert e.status_code == 401 and e.body["type"] == "error" and e.body["error"]["type"] == "authentication_error"
    body = {"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    # the key as x-api-key (what the SDK sends) or as a bearer token
    for h in ({"x-api-key": T.KEY, "Authorization": ""}, {"Authorization": f"Bearer {T.KEY}"}):
        st, _, data = T.raw(srv, "POST", "/v1/messages", body=body, headers=h)
        assert st == 200 and json.loads(data)["type"] == "message", data
    st, _, data = T.raw(srv, "POST", "/v1/messages", body=body, headers={"Authorization": "", "x-api-key": "nope"})
    assert st == 401 and json.loads(data)["error"]["type"] == "authentication_error"
    # x-api-key is an Anthropic header: the OpenAI routes still want the bearer token
    st, _, _ = T.raw(srv, "GET", "/v1/models", headers={"Authorization": "", "x-api-key": T.KEY})
    assert st == 401
    user_msg = {"role": "user", "content": "hi"}
    bad = [
        ({"messages": [user_msg]}, "max_tokens"),
        ({"max_tokens": 0, "messages": [user_msg]}, "max_tokens"),
        ({"max_tokens": 3, "messages": []}, "messages"),
        ({"max_tokens": 3}, "messages"),
        ({"max_tokens": 3, "messages": [user_msg, {"role": "assistant", "content": "Sure"}]}, "prefill"),
        ({"max_tokens": 3, "messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
        ({"max_tokens": 3, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image"),
        ({"max_tokens": 3, "messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content.0"),
        ({"max_tokens": 3, "messages": [{"role": "user", "content": 7}]}, "messages.0.content"),
        ({"max_tokens": 3, "messages": [user_msg], "system": 5}, "system"),
        ({"max_tokens": 3, "messages": [user_msg], "tools": [{"name": "x"}]}, "input_schema"),
        ({"max_tokens": 3, "messages": [user_msg], "tools": [{"type": "web_search_20250305", "name": "w"}]}, "server tools"),
        ({"max_tokens": 3, "messages": [user_msg], "thinking": {"type": "enabled"}}, "budget_tokens"),
        ({"max_tokens": 3, "messages": [user_msg], "stop_sequences": "x"}, "stop_sequences"),
        ({"max_tokens": 3, "messages": [user_msg], "stop_sequences": [""]}, "stop"),
        ({"max_tokens": 3, "messages": [user_msg], "stream": "yes"}, "stream"),
        ({"max_tokens": 10 ** 6, "messages": [user_msg]}, "context length"),
        ({"max_tokens": 3, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]},
                                        user_msg]}, "input"),
    ]
    for b, needle in bad:
        st, _, data = T.raw(srv, "POST", "/v1/messages", body=dict(b, model="tiny"))
        err = json.loads(data)
        assert st == 400 and set(err) == {"type", "error"} and err["type"] == "error", (b, data)
        assert err["error"]["type"] == "invalid_request_error" and needle in err["error"]["message"], (b, needle, data)
    st, _, data = T.raw(srv, "POST", "/v1/messages", body=b"{not json")
    assert st == 400 and json.loads(data)["error"]["type"] == "invalid_request_error"
    st, hd, data = T.raw(srv, "GET", "/v1/messages")
    assert st == 405 and hd.get("allow") == "POST, OPTIONS" and json.loads(data)["type"] == "error"
    try:
        client(srv).messages.create(model="tiny", max_tokens=3, messages=[user_msg, {"role": "assistant", "content": "x"}])
        raise AssertionError("no 400")
    except anthropic.BadRequestError as e:
        assert e.status_code == 400 and "prefill" in e.body["error"]["message"]
    # count_tokens: a prompt longer than the context still has a count
    long = [{"role": "user", "content": "word " * 5000}]
    assert client(srv).messages.count_tokens(model="tiny", messages=long).input_tokens > 4096


def S():
    return T.S
