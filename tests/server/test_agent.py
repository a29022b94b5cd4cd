"""test_agent.py — what agents rely on: the thinking budget (chat
completions' `thinking_budget`, /v1/messages' `thinking.budget_tokens`,
`lilac serve --reasoning-budget`) and the prefix cache's behaviour on
conversations that go on, are edited, or are truncated, tool loops whose
last step is retried or edited (with and without --cache-ram), and its
counters in /health and /metrics.  Registered into test_server.py's list;
uses its servers (S["main"]: API key, 8 slots; S["plain"]: --slots 0) and
starts two more (--reasoning-budget 3 --slots 2; --cache-ram 64M).

The tiny model writes gibberish, so the assertions are about token counts
and equalities: with ignore_eos the reasoning has exactly N tokens, equal to
the first N of the unbudgeted answer, then the closing sequence
"\\n</think>\\n\\n"; cached outputs equal uncached ones; cached_tokens is the
longest snapshot point that prefixes the edited prompt, counted with
`lilac render` + `lilac tokenize`.
"""
import json
import os
import re
import subprocess

import anthropic

import test_server as T

CLOSE = ["\n", "</think>", "\n\n"]
SPECIAL = re.compile(r"^<\|[a-z_]+\|>$")


def tokens_of(resp):
    return [x.token for x in resp.choices[0].logprobs.content]


def budget_req(c, n, max_tokens=20, **kw):
    eb = {"ignore_eos": True, **kw.pop("extra_body", {})}
    if n is not None:
        eb["thinking_budget"] = n
    return T.chat(c, [T.user("Think hard about it")], max_tokens=max_tokens, logprobs=True, extra_body=eb, **kw)


@T.test
def thinking_budget_forces_the_answer():
    c = T.S["main"].client()
    ref = budget_req(c, None)
    rt = tokens_of(ref)
    assert "</think>" not in rt, ("the tiny model closed its reasoning by itself; pick another prompt", rt)
    assert ref.usage.completion_tokens_details.reasoning_tokens == 20
    for n in (1, 5, 12):
        r = budget_req(c, n)
        t = tokens_of(r)
        assert len(t) == 20 == r.usage.completion_tokens and r.choices[0].finish_reason == "length", (n, t)
        assert t[:n] == rt[:n], (n, t, rt)  # the reasoning: the model's first n tokens
        assert t[n:n + 3] == CLOSE, (n, t)  # then the closing sequence, as the template writes it
        assert r.usage.completion_tokens_details.reasoning_tokens == n, (n, r.usage)
        m = r.choices[0].message
        text = bytes(b for x in ref.choices[0].logprobs.content[:n] if not SPECIAL.match(x.token)
                     for b in x.bytes).decode("utf-8", "replace")  # the text skips special tokens
        assert m.reasoning_content == text.strip("\n"), (n, m, text)
        assert m.content, (n, m)  # the answer follows the closing sequence
        # the closing tokens carry the model's logprobs (finite, <= 0)
        for x in r.choices[0].logprobs.content[n:n + 3]:
            assert x.logprob <= 0 and x.logprob > -1e30, x
    # stream == non-stream, budget included
    T.assert_stream_equals(c, [T.user("Think hard about it")], max_tokens=20, logprobs=True,
                           extra_body={"ignore_eos": True, "thinking_budget": 5})
    # a budget above max_tokens changes nothing
    big = budget_req(c, 100)
    assert tokens_of(big) == rt and big.usage.completion_tokens_details.reasoning_tokens == 20
    # max_tokens inside the closing sequence: the first of its tokens only
    cut = budget_req(c, 5, max_tokens=7)
    assert tokens_of(cut) == rt[:5] + CLOSE[:2] and cut.choices[0].finish_reason == "length", tokens_of(cut)
    assert cut.usage.prompt_tokens == ref.usage.prompt_tokens


@T.test
def thinking_budget_zero_is_thinking_off():
    c, p = T.S["main"].client(), T.S["plain"].client()
    msgs = [T.user("No thinking please")]
    off = T.chat(p, msgs, max_tokens=10, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    for srv_c in (c, p):
        z = T.chat(srv_c, msgs, max_tokens=10, extra_body={"thinking_budget": 0})
        assert T.message_of(z) == T.message_of(off), (T.message_of(z), T.message_of(off))
        assert z.usage.prompt_tokens == off.usage.prompt_tokens == T.prompt_token_count(
            {"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}})
        assert getattr(z.choices[0].message, "reasoning_content", None) is None
        assert z.usage.completion_tokens_details.reasoning_tokens == 0
    # budget 0 wins over an explicit enable_thinking: true
    z = T.chat(p, msgs, max_tokens=10, extra_body={"thinking_budget": 0, "chat_template_kwargs": {"enable_thinking": True}})
    assert z.usage.prompt_tokens == off.usage.prompt_tokens
    # thinking off and a budget: nothing to limit
    n = T.chat(p, msgs, max_tokens=10, extra_body={"thinking_budget": 3, "chat_template_kwargs": {"enable_thinking": False}})
    assert T.message_of(n) == T.message_of(off)


@T.test
def thinking_budget_bad_values():
    srv = T.S["main"]
    ok = {"model": "tiny", "messages": [T.user("x")], "max_tokens": 1}
    for v in (-1, "5", 1.5, True, 2 ** 40, [3], {"n": 1}):
        st, _, data = T.raw(srv, "POST", "/v1/chat/completions", body={**ok, "thinking_budget": v})
        err = json.loads(data)["error"]
        assert st == 400 and err["param"] == "thinking_budget" and "thinking_budget" in err["message"], (v, st, err)
    st, _, _ = T.raw(srv, "POST", "/v1/chat/completions", body={**ok, "thinking_budget": None})  # null = omitted
    assert st == 200
    body = {"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}]}
    for bt in (0, -5, "10", 2 ** 40):
        st, _, data = T.raw(srv, "POST", "/v1/messages", body={**body, "thinking": {"type": "enabled", "budget_tokens": bt}})
        err = json.loads(data)["error"]
        assert st == 400 and "budget_tokens" in err["message"], (bt, st, err)
    # response_format is constrained decoding (test_grammar.py): accepted with a budget; a schema
    # keyword lilac cannot enforce is a clear 400, not ignored
    for rf in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
               {"type": "text"}):
        st, _, data = T.raw(srv, "POST", "/v1/chat/completions", body={**ok, "response_format": rf, "thinking_budget": 2})
        assert st == 200, (rf, data)
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a"}}}
    st, _, data = T.raw(srv, "POST", "/v1/chat/completions", body={**ok, "response_format": rf})
    err = json.loads(data)["error"]
    assert st == 400 and err["param"] == "response_format" and "'pattern'" in err["message"], err


@T.test
def anthropic_budget_tokens_is_enforced():
    srv = T.S["main"]
    a = anthropic.Anthropic(base_url=srv.url, api_key=srv.key, max_retries=0, timeout=600)
    msgs = [{"role": "user", "content": "Think hard about it"}]
    o = T.chat(srv.client(), [T.user("Think hard about it")], max_tokens=20, extra_body={"thinking_budget": 4})
    r = a.messages.create(model="tiny", messages=msgs, max_tokens=20, thinking={"type": "enabled", "budget_tokens": 4},
                          extra_body={"temperature": 0})
    thinking = "".join(b.thinking for b in r.content if b.type == "thinking")
    text = "".join(b.text for b in r.content if b.type == "text")
    m = o.choices[0].message
    assert thinking == m.reasoning_content and text == m.content, (r.content, m)
    assert r.usage.output_tokens == o.usage.completion_tokens and o.usage.completion_tokens_details.reasoning_tokens <= 4


@T.test
def reasoning_budget_server_default_and_cache_counters():
    srv = T.Server("budget", "--ctx", "2048", "--slots", "2", "--reasoning-budget", "3")
    try:
        c = srv.client()
        r = budget_req(c, None)
        assert tokens_of(r)[3:6] == CLOSE and r.usage.completion_tokens_details.reasoning_tokens == 3, tokens_of(r)
        r = budget_req(c, 6)  # the request's budget wins
        assert tokens_of(r)[6:9] == CLOSE and r.usage.completion_tokens_details.reasoning_tokens == 6
        # /health and /metrics count hits, reused tokens and evictions (2 slots: the LRU must evict)
        for i in range(3):
            T.chat(c, [{"role": "system", "content": f"System {i}"}, T.user("hello")], max_tokens=2)
        h = T.health(srv)["cache"]
        st, _, body = T.raw(srv, "GET", "/metrics")
        assert st == 200
        metric = lambda name: float(re.search(rf"^{name} (\S+)$", body.decode(), re.M).group(1))
        assert h["evictions"] > 0 and h["evictions"] == metric("lilac_prefix_cache_evictions_total"), (h, body)
        assert h["hits"] == metric("lilac_prefix_cache_hits_total") and h["hits"] > 0, h
        assert h["reused_tokens"] == h["cached_tokens"] == metric("lilac_prefix_cache_reused_tokens_total"), h
        assert h["superseded"] == metric("lilac_prefix_cache_superseded_total"), h
        assert 0 < h["snapshots"] <= 2 and h["snapshots"] == metric("lilac_prefix_cache_snapshots"), h
        assert h["reasoning_tokens"] == metric("lilac_reasoning_tokens_total") == 3 + 6 + 3 * 2, h
    finally:
        rc = srv.stop()
    assert rc == 0, (rc, srv.read_log()[-3000:])


def count_upto_last(request, marker, include=True):
    """Tokens of the rendered prompt up to the last occurrence of marker (with it, or not)."""
    path = os.path.join(T.TMP, "req_agent.json")
    with open(path, "w") as f:
        json.dump(request, f)
    prompt = subprocess.run([T.LILAC, "render", path], capture_output=True, check=True).stdout
    i = prompt.rindex(marker) + (len(marker) if include else 0)
    ppath = os.path.join(T.TMP, "prompt_agent.txt")
    with open(ppath, "wb") as f:
        f.write(prompt[:i])
    ids = subprocess.run([T.LILAC, "tokenize", "--model", T.TINY, "--file", ppath], capture_output=True, check=True).stdout
    return len(json.loads(ids))


HDR = b"<|im_start|>assistant\n"


@T.test
def edited_history_reuses_the_longest_valid_prefix():
    cached, plain = T.S["main"].client(), T.S["plain"].client()
    system = {"role": "system", "content": "You are the edit-test assistant."}
    kw = {"ignore_eos": True}  # no end-of-generation snapshots: the set of snapshots is known
    c1 = [system, T.user("First question.")]
    a1 = T.chat(cached, c1, max_tokens=6, extra_body={**kw, "thinking_budget": 2})  # reasoning and content
    c2 = c1 + [T.message_of(a1), T.user("Second question.")]
    a2 = T.chat(cached, c2, max_tokens=6, extra_body=kw)
    # the first turn lost its reasoning: the state after its assistant header is the boundary
    hdr1 = count_upto_last({"messages": c1}, HDR)
    assert a2.usage.prompt_tokens_details.cached_tokens == hdr1, (a2.usage, hdr1)

    def check(msgs, want, what):
        a = T.chat(cached, msgs, max_tokens=6, extra_body=kw)
        b = T.chat(plain, msgs, max_tokens=6, extra_body=kw)
        assert T.message_of(a) == T.message_of(b), (what, T.message_of(a), T.message_of(b))
        assert a.usage.prompt_tokens == b.usage.prompt_tokens
        assert a.usage.prompt_tokens_details.cached_tokens == want, (what, a.usage, want)

    # the client edits the assistant's answer: up to that turn's header
    edited = dict(T.message_of(a1), content="An edited answer.")
    check(c1 + [edited, T.user("Second question.")], hdr1, "edit answer")
    # it edits (or regenerates) its last message: everything before that message
    last = c1 + [T.message_of(a1), T.user("Second question, reworded.")]
    check(last, count_upto_last({"messages": last}, b"<|im_start|>user\n", include=False), "edit last")
    # it drops the first turn (a truncated history): the system turn
    check([system, T.user("Second question.")],
          T.prompt_token_count({"messages": [system, T.user("x")]}, upto=b"<|im_start|>user"), "truncate")
    # it edits the system prompt: nothing
    check([{"role": "system", "content": "Another edit-test system."}] + c2[1:], 0, "edit system")


@T.test
def preserve_thinking_extends_the_previous_prompt():
    cached = T.S["main"].client()
    system = {"role": "system", "content": "You are the preserve-test assistant."}
    kw = {"chat_template_kwargs": {"preserve_thinking": True}, "thinking_budget": 2}
    c1 = [system, T.user("One.")]
    a = T.chat(cached, c1, max_tokens=6, extra_body=kw)
    c2 = c1 + [T.message_of(a), T.user("Two.")]
    b = T.chat(cached, c2, max_tokens=6, extra_body=kw)
    # the think block stays, so the whole previous prompt is a prefix (not just up to its header)
    assert b.usage.prompt_tokens_details.cached_tokens >= a.usage.prompt_tokens, (a.usage, b.usage)
    without = T.chat(cached, [system, T.user("One."), T.message_of(a), T.user("Three.")], max_tokens=6,
                     extra_body={"thinking_budget": 2})
    assert without.usage.prompt_tokens_details.cached_tokens == count_upto_last({"messages": c1}, HDR), without.usage


@T.test
def regenerate_after_truncating_reuses_the_whole_prompt():
    """The client drops the last exchange to regenerate the answer before it:
    that request's prompt end is still cached (the next turn re-rendered the
    answer without its think block, so it did not supersede it)."""
    cached, plain = T.S["main"].client(), T.S["plain"].client()
    c1 = [{"role": "system", "content": "You are the regenerate-test assistant."}, T.user("A question.")]
    a1 = T.chat(cached, c1, max_tokens=6, extra_body={"ignore_eos": True})
    T.chat(cached, c1 + [T.message_of(a1), T.user("Another one.")], max_tokens=6, extra_body={"ignore_eos": True})
    again = T.chat(cached, c1, max_tokens=6, extra_body={"ignore_eos": True})
    cold = T.chat(plain, c1, max_tokens=6, extra_body={"ignore_eos": True})
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens == a1.usage.prompt_tokens, again.usage
    assert T.message_of(again) == T.message_of(cold) == T.message_of(a1)


@T.test
def tool_loop_retries_and_edits():
    """A tool loop's last step retried (the request before it sent again) or
    its last tool result edited: without --cache-ram the loop is prefilled
    again from the assistant header after the user message (each prompt end
    superseded the one before); with it, from the step before (kept in RAM).
    (No tool declarations: the template renders the calls and results
    without them, and the prompts stay short.)"""
    plain = T.S["plain"].client()
    srv = T.Server("toolloop-ram", "--ctx", "4096", "--slots", "8", "--cache-ram", "64M")
    kw = {"ignore_eos": True}
    try:
        for name, client in (("slots only", T.S["main"].client()), ("--cache-ram", srv.client())):
            system = {"role": "system", "content": f"You are the tool-loop test assistant ({name})."}
            msgs = [system, T.user("Check the weather in Rome and in Paris.")]
            prompts = []
            for k, city in enumerate(("Rome", "Paris")):
                r = T.chat(client, msgs, max_tokens=6, extra_body=kw)
                prompts.append(r.usage.prompt_tokens)
                call = {"id": f"call_{k}", "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}
                msgs += [dict(T.message_of(r), tool_calls=[call]),
                         {"role": "tool", "tool_call_id": f"call_{k}", "content": f"{city}: sunny"}]
            third = T.chat(client, msgs, max_tokens=6, extra_body=kw)
            assert third.usage.prompt_tokens_details.cached_tokens >= prompts[1], (name, third.usage, prompts)
            hdr = count_upto_last({"messages": msgs[:2]}, HDR)
            cases = (("edit the last tool result", msgs[:-1] + [dict(msgs[-1], content="Paris: rain")]),
                     ("retry the last step", msgs[:-2]))
            for what, m in cases:
                a = T.chat(client, m, max_tokens=6, extra_body=kw)
                b = T.chat(plain, m, max_tokens=6, extra_body=kw)
                assert T.message_of(a) == T.message_of(b), (name, what, T.message_of(a), T.message_of(b))
                want = prompts[1] if name == "--cache-ram" else hdr
                assert a.usage.prompt_tokens_details.cached_tokens == want, (name, what, a.usage, want, prompts)
        t = T.health(srv)["cache"]["tiers"]
        assert t["ram"]["hits"] == 2 and t["disk"]["snapshots"] == 0, t
    finally:
        rc = srv.stop()
    assert rc == 0, (rc, srv.read_log()[-3000:])
