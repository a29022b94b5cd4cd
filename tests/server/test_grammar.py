"""test_grammar.py — constrained decoding end to end: response_format
json_object / json_schema, tool_choice required / named (and Anthropic's
any / tool) on the tiny model, sampled (temperature >= 1, many seeds).

The corpus is tests/fixtures/schemas/: files {"schema": ...} (answers, as
response_format json_schema) and {"tool": ...} (real-style tool definitions:
files, shell, search, calendar, mail, ...; as tool_choice "required").  Every finished output must parse and validate under its schema
with Python's `jsonschema` (installed into .venv by run.sh; without it the
validating tests say SKIP and why).  The tiny model writes gibberish, slowly
ending free strings, so each schema gets a few seeds until one finishes
(fixed seeds: the outcome is the same every run); outputs cut by max_tokens
must say finish_reason "length".  Registered into test_server.py's list.
"""
import datetime
import glob
import json
import os
import re
import zlib

import anthropic

import test_server as T

try:
    import jsonschema
except ImportError as e:  # noqa: F841
    jsonschema = None
    WHY = f"the jsonschema package is not importable ({e}); tests/server/run.sh installs it into .venv with pip"

CORPUS = "tests/fixtures/schemas"
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def sanitized():
    """Under ASan (make test-asan) a part of the corpus: memory errors, not breadth, are the point there."""
    return "asan" in T.LILAC


def corpus(kind, every=None):
    out = []
    for p in sorted(glob.glob(os.path.join(CORPUS, "*.json"))):
        d = json.load(open(p, encoding="utf-8"))
        if kind in d:
            out.append((os.path.basename(p)[:-5], d[kind]))
    step = every or ((3 if kind == "schema" else 5) if sanitized() else 1)
    return out[::step]


def check_formats(value, schema):
    """Formats jsonschema checks only with optional packages (time, date-time): checked here."""
    if isinstance(schema, dict):
        f = schema.get("format")
        if isinstance(value, str) and f in ("date-time", "time"):
            pat = (r"^\d{4}-\d{2}-\d{2}T" if f == "date-time" else "^") + r"\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
            assert re.match(pat, value), (f, value)
            if f == "date-time":
                datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            else:
                datetime.time.fromisoformat(value.split("+")[0].split("-")[0].rstrip("Z"))


def validate(value, schema):
    cls = jsonschema.validators.validator_for(schema)  # the schema's draft (2020-12 unless $schema says otherwise)
    cls.check_schema(schema)
    cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
    walk_formats(value, schema, schema)


def walk_formats(value, schema, root):
    """check_formats over the value, following properties/items/$ref/anyOf (enough for the corpus)."""
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            if part:
                node = node[part]
        return walk_formats(value, node, root)
    check_formats(value, schema)
    for alt in schema.get("anyOf", []) + schema.get("oneOf", []) + schema.get("allOf", []):
        try:
            jsonschema.validate(value, dict(alt, **({"$defs": root["$defs"]} if "$defs" in root else {})))
        except Exception:  # noqa: BLE001
            continue
        walk_formats(value, alt, root)
    if isinstance(value, dict):
        for k, v in value.items():
            if k in schema.get("properties", {}):
                walk_formats(v, schema["properties"][k], root)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            walk_formats(v, schema["items"], root)


def gsrv():
    """This suite's server: one thread (on the tiny model the fastest by far) and a few slots."""
    if "grammar" not in T.S:
        T.S["grammar"] = T.Server("grammar", "--ctx", "4096", "--slots", "4", "--threads", "1", key=None)
    return T.S["grammar"]


def post(srv, path, body):
    st, _, data = T.raw(srv, "POST", path, body)
    return st, json.loads(data)


def skip(name):
    print(f"  SKIP {name}: {WHY}")


@T.test
def structured_outputs_corpus():
    """Every schema of the corpus: sampled outputs (temperature 1.0-1.5) that parse and validate."""
    if jsonschema is None:
        return skip("structured_outputs_corpus")
    schemas = corpus("schema")
    assert len(corpus("schema", 1)) + len(corpus("tool", 1)) >= 50, "the corpus holds fewer than 50 schemas"
    srv, finished, cut = gsrv(), 0, 0
    for i, (name, schema) in enumerate(schemas):
        ok = False
        for seed in seeds(name, 6):
            st, r = post(srv, "/v1/chat/completions", {
                "messages": [T.user(f"Answer in JSON ({name})")], "max_tokens": 500, "seed": seed,
                "temperature": 1.0 + (i % 6) / 10, "response_format": {"type": "json_schema", "json_schema": {
                    "name": name[:64], "schema": schema, "strict": True}}, **NO_THINK})
            assert st == 200, (name, r)
            ch = r["choices"][0]
            if ch["finish_reason"] == "length":
                cut += 1
                assert r["usage"]["completion_tokens"] == 500, (name, r["usage"])
                continue
            assert ch["finish_reason"] == "stop", (name, ch)
            try:
                value = json.loads(ch["message"]["content"])
                validate(value, schema)
            except Exception as e:
                raise AssertionError(f"{name} seed {seed}: {e!r}: {ch['message']['content']!r}") from e
            finished += 1
            ok = True
            break
        assert ok, f"{name}: no seed finished within 500 tokens; pick other seeds"
    print(f"    {len(schemas)} schemas: {finished} outputs validated, {cut} cut by max_tokens")


def seeds(name, n=3):
    """Fixed seeds per corpus entry (by name: adding files changes no other entry's outcome)."""
    base = zlib.crc32(name.encode()) % 10000
    return range(base, base + n)


def tool_call_values(calls, tools):
    by_name = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in tools}
    for c in calls:
        assert c["type"] == "function" and c["function"]["name"] in by_name, c
        args = json.loads(c["function"]["arguments"])
        validate(args, by_name[c["function"]["name"]])


@T.test
def tool_choice_required_corpus():
    """tool_choice "required" for each real-style tool: calls whose arguments validate.  The tool
    files bound their strings (maxLength): raw parameter text ends only with "\n</parameter>", which
    the tiny model practically never writes by chance, while a bound ends it."""
    if jsonschema is None:
        return skip("tool_choice_required_corpus")
    tools = corpus("tool")
    srv, ncalls = gsrv(), 0
    for i, (name, tool) in enumerate(tools):
        ok = False
        for seed in seeds(name, 4):
            ts = [tool]
            st, r = post(srv, "/v1/chat/completions", {
                "messages": [T.user("Use a tool")], "tools": ts, "tool_choice": "required", "max_tokens": 600,
                "seed": seed, "temperature": 1.0 + (i % 5) / 10, "parallel_tool_calls": i % 2 == 1, **NO_THINK})
            assert st == 200, (name, r)
            ch = r["choices"][0]
            if ch["finish_reason"] == "length":
                continue
            assert ch["finish_reason"] == "tool_calls", (name, ch)
            calls = ch["message"]["tool_calls"]
            assert calls and not (ch["message"]["content"] or "").strip(), (name, ch["message"])
            assert i % 2 == 1 or len(calls) == 1, (name, "parallel_tool_calls false: one call", calls)
            try:
                tool_call_values(calls, ts)
            except Exception as e:
                raise AssertionError(f"{name} seed {seed}: {e!r}: {calls}") from e
            ncalls += len(calls)
            ok = True
            break
        assert ok, f"{name}: no seed finished within 600 tokens"
    print(f"    {len(tools)} tools: {ncalls} calls validated")


@T.test
def tool_choice_named_and_single():
    """A named function: only its calls; parallel_tool_calls false: exactly one call."""
    if jsonschema is None:
        return skip("tool_choice_named_and_single")
    names = ["get_weather", "calculator", "list_calendar_events", "get_time"]
    tools = [t for _, t in corpus("tool", 1) if t["function"]["name"] in names + ["read_file", "grep", "sql_query"]]
    srv = gsrv()
    if sanitized():
        names = names[1:3]
    for i, name in enumerate(names):
        done = False
        for seed in range(40 + 4 * i, 44 + 4 * i):
            st, r = post(srv, "/v1/chat/completions", {
                "messages": [T.user("Call it")], "tools": tools, "max_tokens": 400, "seed": seed, "temperature": 1.2,
                "tool_choice": {"type": "function", "function": {"name": name}}, "parallel_tool_calls": False,
                **NO_THINK})
            assert st == 200, r
            ch = r["choices"][0]
            if ch["finish_reason"] == "length":
                continue
            calls = ch["message"]["tool_calls"]
            assert ch["finish_reason"] == "tool_calls" and len(calls) == 1, (name, ch)
            assert calls[0]["function"]["name"] == name, (name, calls)
            tool_call_values(calls, tools)
            done = True
            break
        assert done, name


@T.test
def json_object_always_parses():
    """response_format json_object: every finished output is a JSON object; cut ones say "length"."""
    srv, parsed = gsrv(), 0
    for seed in range(1, 6 if sanitized() else 11):
        st, r = post(srv, "/v1/chat/completions", {
            "messages": [T.user("JSON please")], "max_tokens": 400, "seed": seed, "temperature": 1.3,
            "response_format": {"type": "json_object"}, **NO_THINK})
        assert st == 200, r
        ch = r["choices"][0]
        if ch["finish_reason"] == "length":
            continue
        assert ch["finish_reason"] == "stop", ch
        assert isinstance(json.loads(ch["message"]["content"]), dict), ch
        parsed += 1
    assert parsed >= (1 if sanitized() else 3), parsed
    # the legacy completions endpoint takes it too (no template, no think block)
    for seed in range(1, 4):
        st, r = post(srv, "/v1/completions", {"prompt": "JSON:", "max_tokens": 400, "seed": seed, "temperature": 1.2,
                                              "response_format": {"type": "json_object"}})
        assert st == 200, r
        if r["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(r["choices"][0]["text"]), dict), r
            parsed += 1


@T.test
def constrained_thinking_and_budget():
    """Thinking on: the reasoning is free, the answer after </think> follows the schema (budget-forced close)."""
    if jsonschema is None:
        return skip("constrained_thinking_and_budget")
    srv = gsrv()
    schema = json.load(open(os.path.join(CORPUS, "classification.json")))["schema"]
    done = 0
    for seed in range(3, 9):
        st, r = post(srv, "/v1/chat/completions", {
            "messages": [T.user("Classify")], "max_tokens": 300, "seed": seed, "temperature": 1.1,
            "thinking_budget": 6, "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}})
        assert st == 200, r
        ch = r["choices"][0]
        assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == 6, r["usage"]
        assert ch["message"]["reasoning_content"], ch
        if ch["finish_reason"] != "stop":
            continue
        validate(json.loads(ch["message"]["content"]), schema)
        done += 1
    assert done >= 2, done
    # a tool call after free reasoning
    tools = [t for n, t in corpus("tool", 1) if n in ("tool_calculator", "tool_get_weather")]
    for seed in range(3, 9):
        st, r = post(srv, "/v1/chat/completions", {"messages": [T.user("Compute")], "tools": tools, "max_tokens": 400,
                                                   "seed": seed, "thinking_budget": 4, "tool_choice": "required"})
        assert st == 200, r
        if r["choices"][0]["finish_reason"] == "tool_calls":
            tool_call_values(r["choices"][0]["message"]["tool_calls"], tools)
            break
    else:
        raise AssertionError("no seed made a tool call within 400 tokens")


@T.test
def constrained_stream_and_length():
    """Streamed == non-streamed for a seeded constrained request; a small max_tokens gives "length"."""
    c = gsrv().client()
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": json.load(
        open(os.path.join(CORPUS, "person.json")))["schema"]}}
    kw = dict(max_tokens=200, temperature=1.2, seed=11, response_format=rf, extra_body=NO_THINK)
    r = T.chat(c, [T.user("Who?")], **kw)
    text = "".join(ch.choices[0].delta.content or "" for ch in T.chat(c, [T.user("Who?")], stream=True, **kw)
                   if ch.choices)
    assert text == r.choices[0].message.content, (text, r.choices[0].message.content)
    r = T.chat(c, [T.user("Who?")], **dict(kw, max_tokens=4))
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 4, r
    # greedy works too (temperature 0): same answer twice
    g1 = T.chat(c, [T.user("Who?")], **dict(kw, temperature=0))
    g2 = T.chat(c, [T.user("Who?")], **dict(kw, temperature=0))
    assert g1.choices[0].message.content == g2.choices[0].message.content


@T.test
def constrained_errors():
    """Refusals name the keyword and its place (400, param response_format / tools)."""
    srv = gsrv()
    base = {"messages": [T.user("x")], "max_tokens": 4}

    def rf(schema):
        return dict(base, response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}})

    cases = [
        (rf({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}), "response_format",
         "unsupported keyword 'pattern' at #/properties/id"),
        (rf({"type": "array", "items": {"not": {"type": "null"}}}), "response_format", "unsupported keyword 'not' at #/items"),
        (rf({"$ref": "https://example.com/schema.json"}), "response_format", "only local refs"),
        (rf({"type": "integer", "minimum": 3, "maximum": 1}), "response_format", "no integer lies in the bounds"),
        (dict(base, response_format={"type": "json_schema", "json_schema": {"name": "n"}}), "response_format", "json_schema.schema'"),
        (dict(base, response_format={"type": "yaml"}), "response_format", "not supported"),
        (dict(base, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "q": {"type": "string", "format": "date", "maxLength": 3}}}}}], tool_choice="required"), "tools",
         "'format' with minLength/maxLength is not supported at #/properties/q"),
        (dict(base, tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "q": {"uniqueItems": True}}}}}], tool_choice={"type": "function", "function": {"name": "f"}}), "tools",
         "tools[0].function.parameters: unsupported keyword 'uniqueItems' at #/properties/q"),
    ]
    for body, param, msg in cases:
        st, r = post(srv, "/v1/chat/completions", body)
        assert st == 400 and r["error"]["param"] == param and msg in r["error"]["message"], (body, st, r)
    # tool_choice auto ignores tool schemas it would not need... unless a format asks for a grammar
    st, r = post(srv, "/v1/chat/completions", cases[6][0] | {"tool_choice": "auto"})
    assert st == 200, r


@T.test
def anthropic_tool_choice_enforced():
    """/v1/messages tool_choice any / tool: tool_use blocks whose input validates."""
    if jsonschema is None:
        return skip("anthropic_tool_choice_enforced")
    srv = gsrv()
    c = anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0, timeout=600)
    tools = []
    for n, t in corpus("tool", 1):
        if n in ("tool_get_weather", "tool_calculator", "tool_list_calendar_events"):
            f = t["function"]
            tools.append({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
    schemas = {t["name"]: t["input_schema"] for t in tools}
    for choice in ({"type": "any"}, {"type": "tool", "name": "calculator"},
                   {"type": "any", "disable_parallel_tool_use": True}):
        for seed_try in range(6):
            m = c.messages.create(model="tiny", max_tokens=400, tools=tools, tool_choice=choice,
                                  thinking={"type": "disabled"}, messages=[{"role": "user", "content": "go"}],
                                  extra_body={"seed": 20 + seed_try, "temperature": 1.0})
            if m.stop_reason == "max_tokens":
                continue
            assert m.stop_reason == "tool_use", (choice, m)
            uses = [b for b in m.content if b.type == "tool_use"]
            assert uses and all(b.type == "tool_use" for b in m.content), (choice, m.content)
            for b in uses:
                validate(b.input, schemas[b.name])
                if choice["type"] == "tool":
                    assert b.name == "calculator", b
            if choice.get("disable_parallel_tool_use"):
                assert len(uses) == 1, uses
            break
        else:
            raise AssertionError(f"{choice}: no seed finished within 400 tokens")
