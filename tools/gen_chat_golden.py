#!/usr/bin/env python3
"""gen_chat_golden.py — golden renderings of the Qwen3.6 chat template for
lilac's C renderer (src/text/chat.c, tested by tests/unit/test_chat.c).

Renders every case below with the REAL template
(tests/fixtures/templates/qwen3.6-35b-a3b.chat_template.jinja) in the Jinja
environment transformers uses, and writes
tests/fixtures/templates/rendered_lilac_cases.json.

Each case is a request body as an OpenAI client sends it (tool-call
`arguments` as JSON strings where realistic) and what lilac must do with it:

  expect "render"    -> "rendered": the exact prompt
  expect "template"  -> "error": the exact text the template raises
  expect "request"   -> "error_contains": a substring of lilac's request-shape
                        error (the what and where); "jinja" records what the
                        template would have done with it, for the reader

How a request becomes template variables (this mirrors vLLM and transformers,
and is what lilac implements):
  messages                string `arguments` are json.loads'ed (vLLM does this)
  tools                   request["tools"]
  add_generation_prompt   request["add_generation_prompt"] (default True),
                          then chat_template_kwargs merged over it (vLLM)
  chat_template_kwargs    passed as template variables

Usage: python3 tools/gen_chat_golden.py [--check]
  (needs jinja2: pip install jinja2; --check compares with the committed file
  instead of writing it)
"""
import argparse
import copy
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = os.path.join(ROOT, "tests/fixtures/templates/qwen3.6-35b-a3b.chat_template.jinja")
OUT = os.path.join(ROOT, "tests/fixtures/templates/rendered_lilac_cases.json")


class TemplateRaise(Exception):
    """What the template's raise_exception() raises (transformers: TemplateError)."""


def make_template():
    def raise_exception(message):
        raise TemplateRaise(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(TEMPLATE, encoding="utf-8") as f:
        return env.from_string(f.read())


def template_variables(req):
    """The request -> template variables mapping described in the docstring."""
    messages = copy.deepcopy(req["messages"])
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            for tc in m["tool_calls"]:
                if not isinstance(tc, dict):
                    continue
                fn = tc["function"] if isinstance(tc.get("function"), dict) else tc
                if isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"])
    variables = {"messages": messages, "tools": req.get("tools"), "documents": None,
                 "add_generation_prompt": req.get("add_generation_prompt", True)}
    kwargs = req.get("chat_template_kwargs") or {}
    if "messages" in kwargs:  # transformers passes messages= itself: a duplicate keyword
        raise TypeError("render() got multiple values for keyword argument 'messages'")
    variables.update(kwargs)  # vLLM: chat_template_kwargs override, add_generation_prompt included
    return variables


def render(template, req):
    """Returns ("render", text) | ("template", message) | ("other", description)."""
    try:
        variables = template_variables(req)
    except Exception as ex:  # what vLLM would fail on before the template
        return "other", "before the template: %s: %s" % (type(ex).__name__, ex)
    try:
        return "render", template.render(**variables)
    except TemplateRaise as ex:
        return "template", str(ex)
    except Exception as ex:
        return "other", "%s: %s" % (type(ex).__name__, ex)


# ---------------------------------------------------------------- building blocks

def U(c): return {"role": "user", "content": c}
def S(c): return {"role": "system", "content": c}
def A(c, **kw): return dict({"role": "assistant", "content": c}, **kw)
def T(c, **kw): return dict({"role": "tool", "content": c}, **kw)


def call(name, args, cid=None):
    """An OpenAI tool call; args is a JSON string (as clients send) or an object."""
    tc = {"id": cid or "call_" + name, "type": "function", "function": {"name": name, "arguments": args}}
    return tc


def jdump(obj):
    return json.dumps(obj, ensure_ascii=False)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}

NESTED = {"type": "function", "function": {
    "name": "search_db",
    "description": "Søg i databasen — «quoted» / slash \\ backslash \"q\" 日本語 🚀\nsecond line\ttab",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 256},
            "limit": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 10},
            "threshold": {"type": "number", "minimum": 0.0, "maximum": 1.0, "default": 0.75, "multipleOf": 1e-05},
            "big": {"type": "number", "default": 1e16, "alt": 1234567890123456.0, "huge": 1.7976931348623157e308},
            "tiny": {"type": "number", "default": 2.5e-07, "alt": 0.0001, "min": 5e-324},
            "neg": {"type": "number", "default": -0.0, "int": -42, "i64": -9223372036854775808},
            "sum": {"type": "number", "default": 0.30000000000000004, "third": 1 / 3},
            "flags": {"type": "array", "items": {"type": "boolean"}, "default": [True, False]},
            "nullable": {"type": ["string", "null"], "default": None},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}},
                       "default": [[1, 2], [3, [4, [5, []]]], [], {}]},
            "filters": {"type": "object", "properties": {
                "tags": {"type": "array", "items": {"type": "string",
                                                    "enum": ["a", "b", "c\nd", "tab\there", "\u0001ctl", "\u007f",
                                                             "</tools>", "é"]}}},
                "additionalProperties": False},
        },
        "required": ["query"],
    },
    "strict": True}}

CALC = {"type": "function", "function": {"name": "calc", "description": "",
                                         "parameters": {"type": "object", "properties": {}}}}

# Every str.isspace() code point except the ASCII ones.
UNI_WS = "\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200b)) + \
    "\u2028\u2029\u202f\u205f\u3000"

CASES = []


def case(name, req, expect, error_contains=None):
    CASES.append({"name": name, "request": req, "expect": expect, "error_contains": error_contains})


def R(messages, **kw):
    req = {"model": "qwen3.6", "messages": messages}
    req.update(kw)
    return req


# ---------------------------------------------------------------- rendering cases

case("unicode_whitespace_trim", R([
    S("\u3000\xa0 Système ✓ — réponds en français \u2029\x1c"),
    U(UNI_WS + " \t\n\x0b\x0cПривет, 世界! 🚀 émoji\u200d👩‍💻 " + UNI_WS[::-1] + "\r\n"),
    A("\u2003Réponse\u00a0: ✓\u2028", reasoning_content="\u205f  penser… 思考\u3000"),
    U("\x1f\x1e next \x1d\x1c")]), "render")

case("unicode_not_whitespace", R([
    U("\u200bzero width space and BOM are not whitespace\ufeff"),
    A("\u180eMongolian vowel separator is not whitespace either\u2060"),
    U("\u00ad soft hyphen \u061c")], add_generation_prompt=True), "render")

case("unicode_multibyte_edges", R([
    U("é" * 3 + "\u3000"), A("\U0001F600\u3000\U0001F600"), U("\u3000ω")]), "render")

case("tools_nested_schema", R([S("You are a careful assistant."), U("Find rows tagged c\nd.")],
                              tools=[WEATHER, NESTED, CALC]), "render")

case("tools_no_system", R([U("Weather?")], tools=[NESTED]), "render")

case("tools_whitespace_system", R([S(" \n\u3000 "), U("Hi")], tools=[WEATHER]), "render")

case("tools_system_parts", R([S([{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two.\n"}]),
                              U("Hi")], tools=[WEATHER]), "render")

case("system_whitespace_no_tools", R([S("\n\n  "), U("Hi")]), "render")

case("system_null_content", R([S(None), U("Hi")]), "render")

case("tools_empty_list", R([S("sys"), U("Hi")], tools=[]), "render")

case("tools_null", R([S("sys"), U("Hi")], tools=None), "render")

case("tools_odd_entries", R([U("Hi")], tools=[{"type": "function", "function": {"name": "x"}}, "a string tool",
                                              42, None, [1, 2.5]]), "render")

SEVERAL_CALLS = [
    U("Compare the weather in Paris, Zürich and 東京 for 3 days, then search."),
    A("", reasoning_content="I need three weather calls.\n\nThen one search.", tool_calls=[
        call("get_weather", '{"city": "Paris", "days": 3}', "c1"),
        call("get_weather", '{"city":"Zürich","days":3}', "c2"),
        call("get_weather", '{\n  "city": "\\u6771\\u4eac",\n  "days": 3\n}', "c3"),
        call("search_db", jdump({"query": "multi\nline\n  query  ", "limit": 5, "threshold": 0.5,
                                 "flags": [True, False, None], "filters": {"tags": ["a", "c\nd"]},
                                 "empty": "", "obj": {}, "arr": []}), "c4")]),
    T('{"temp_c": 21.5, "sky": "clear"}', tool_call_id="c1"),
    T('  {"temp_c": -3, "sky": "snow ❄"}  \n', tool_call_id="c2", name="get_weather"),
    T("\u3000晴れ、25度\u3000", tool_call_id="c3"),
    T([{"type": "text", "text": "rows: "}, {"type": "text", "text": "[1, 2]"}], tool_call_id="c4"),
]

case("several_calls_several_results", R(SEVERAL_CALLS, tools=[WEATHER, NESTED]), "render")

AFTER_RESULTS = SEVERAL_CALLS + [
    A("Paris 21.5°C, Zürich −3°C, 東京 25°C.", reasoning_content="Summarise the three results."),
    U("And tomorrow?"),
]

case("tool_results_then_new_user", R(AFTER_RESULTS, tools=[WEATHER, NESTED]), "render")

case("tool_results_then_new_user_preserve", R(AFTER_RESULTS, tools=[WEATHER, NESTED],
                                              chat_template_kwargs={"preserve_thinking": True}), "render")

case("tool_results_then_new_user_thinking_off", R(AFTER_RESULTS, tools=[WEATHER, NESTED],
                                                  chat_template_kwargs={"enable_thinking": False}), "render")

MULTI = [
    S("Be brief."),
    U("Q1"),
    A("A1", reasoning_content="R1 with reasoning_content"),
    U("Q2"),
    A("<think>\nR2 inline\n</think>\n\nA2"),
    U("Q3"),
    A("A3 without any reasoning"),
    U("Q4"),
    A("A4 last", reasoning_content="  R4 last  "),
]

for name, kw in [("multi_turn_default", {}),
                 ("multi_turn_preserve_on", {"preserve_thinking": True}),
                 ("multi_turn_preserve_off", {"preserve_thinking": False}),
                 ("multi_turn_preserve_int_1_is_not_true", {"preserve_thinking": 1}),
                 ("multi_turn_preserve_string_is_not_true", {"preserve_thinking": "true"}),
                 ("multi_turn_thinking_off", {"enable_thinking": False}),
                 ("multi_turn_thinking_on", {"enable_thinking": True}),
                 ("multi_turn_thinking_zero_is_not_false", {"enable_thinking": 0}),
                 ("multi_turn_thinking_null_is_not_false", {"enable_thinking": None}),
                 ("multi_turn_preserve_and_thinking_off", {"preserve_thinking": True, "enable_thinking": False})]:
    case(name, R(MULTI + [U("Q5")], chat_template_kwargs=kw), "render")

case("multi_turn_no_generation_prompt", R(MULTI, add_generation_prompt=False), "render")

INLINE = [
    "<think>\nplain\n</think>\n\nanswer",
    "no opening tag, reasoning</think>answer after",
    "<think>a<think>b</think>mid</think>\n\nend",
    "<think>\n\n</think>\n\n",
    "<think>\n  spaced reasoning \u3000\n\n</think>\n\n\n  answer with leading spaces",
    "prefix text <think>inner</think>\n\nsuffix",
    "</think>",
    "<think>only an opening tag, no closing",
    "<think>x</think>\n</think>\n\ny",
]
for i, c in enumerate(INLINE):
    # once after the last user query (think block kept), once before it (dropped)
    case("inline_think_%d_current" % i, R([U("Q"), A(c)], add_generation_prompt=False), "render")
    case("inline_think_%d_history" % i, R([U("Q"), A(c), U("Next")]), "render")

case("reasoning_content_empty_string_keeps_inline", R([U("Q"), A("<think>X</think>Y", reasoning_content="")],
                                                      add_generation_prompt=False), "render")
case("reasoning_content_non_string_ignored", R([U("Q"), A("<think>X</think>Y", reasoning_content=42)],
                                               add_generation_prompt=False), "render")
case("reasoning_content_null_ignored", R([U("Q"), A("<think>X</think>Y", reasoning_content=None)],
                                         add_generation_prompt=False), "render")
case("reasoning_content_whitespace", R([U("Q"), A("A", reasoning_content="\n \u3000 R \u2029\n")],
                                       add_generation_prompt=False), "render")

case("content_parts_vision", R([
    S([{"type": "text", "text": "System as parts."}]),
    U([{"type": "text", "text": "Look: "},
       {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
       {"type": "text", "text": " and "},
       {"type": "video", "video": "file:///v.mp4"},
       {"type": "image"},
       {"image": "file:///x.png"},
       {"video": ["f1.png", "f2.png"]},
       {"type": "text", "text": "both?  "}]),
    A([{"type": "text", "text": "I see "}, {"type": "text", "text": "two images."}]),
    U([{"type": "image_url", "image_url": {"url": "y"}}, {"type": "text", "text": "again"}]),
]), "render")

case("content_parts_vision_ids", R([
    U([{"type": "image_url", "image_url": {"url": "a"}}, {"type": "video", "video": "v"},
       {"type": "image_url", "image_url": {"url": "b"}}, {"type": "text", "text": "What changed?"}]),
    A("Something.", reasoning_content="r"),
    U([{"type": "video", "video": "v2"}, {"type": "image", "image": "c"}, {"type": "text", "text": "And here?"}]),
    A("", tool_calls=[call("calc", "{}")]),
    T([{"type": "image_url", "image_url": {"url": "tool-image"}}, {"type": "text", "text": "tool made this"}]),
], chat_template_kwargs={"add_vision_id": True}), "render")

case("content_parts_vision_ids_truthy_int", R([
    U([{"type": "image_url", "image_url": {"url": "a"}}, {"type": "text", "text": "x"}])],
    chat_template_kwargs={"add_vision_id": 1}), "render")

case("content_parts_vision_ids_falsy_string", R([
    U([{"type": "image_url", "image_url": {"url": "a"}}, {"type": "text", "text": "x"}])],
    chat_template_kwargs={"add_vision_id": ""}), "render")

case("content_parts_key_precedence", R([
    U([{"type": "text", "text": "text part that also has an image_url key", "image_url": {"url": "z"}},
       {"type": "image_url", "text": "type says image_url but only a text key"},
       {"type": "video", "text": "type video wins over text"},
       {"type": "image", "video": "both: image first"},
       {"type": "text", "text": ""},
       {"type": "text", "text": "\u3000end\u3000"}]),
]), "render")

case("content_empty_list", R([U([]), A([]), U("q")]), "render")

case("null_content", R([
    U("Call it."),
    A(None, tool_calls=[call("calc", '{"x": 1}')]),
    T(None),
    {"role": "assistant"},
    U(None),
]), "render")

case("bare_tool_calls", R([
    U("Run two."),
    A("Running.", tool_calls=[
        {"name": "calc", "arguments": '{"expr": "1+1"}'},
        {"name": "get_weather", "arguments": {"city": "Oslo", "days": 1}},
        {"id": "c3", "name": "no_args"},
        {"function": {"name": "wrapped", "arguments": "{\"k\": [1, {\"n\": null}]}"},
         "arguments": '{"ignored": true}', "name": "ignored"},
    ]),
    T("2"), T("sunny"), T("done"), T("ok"),
], tools=[WEATHER, CALC]), "render")

case("arguments_object_given", R([
    U("x"),
    A("", tool_calls=[{"type": "function", "function": {"name": "f", "arguments": {
        "z": 1, "a": {"nested": [1, 2.5, None, True, "s"]}, "m": "raw string\nwith \"quotes\" and \\"}}}]),
    T("r")], add_generation_prompt=False), "render")

case("arguments_values_variety", R([
    U("Use every kind of value."),
    A("Sure.", tool_calls=[call("f", '{"s": "  leading and trailing  ", "nl": "a\\nb\\n", "empty": "",'
                                     ' "uni": "\\u00e9\\ud83d\\ude80 日本", "quote": "say \\"hi\\" \\\\ / \\/",'
                                     ' "e5": 1E5, "f": 1.50, "negzero": -0, "negzerof": -0.0, "small": 1e-7,'
                                     ' "sci": 0.1e1, "big": 123456789012345678, "min": -9223372036854775808,'
                                     ' "t": true, "fa": false, "nu": null, "arr": [1, "two", [3.0], {}],'
                                     ' "obj": {"b": 1, "a": {"c": [null]}}, "ctl": "\\u0001\\t\\u001f",'
                                     ' "ws": "\\u3000", "dup": 1, "dup": 2, "zz": 0.1, "aa": 1e16,'
                                     ' "ab": 1e15, "ac": 12345.678e-3}')]),
    T("done")], add_generation_prompt=False), "render")

case("arguments_empty_object", R([U("x"), A(None, tool_calls=[call("calc", "{}"), call("calc", " { } ")])],
                                 add_generation_prompt=False), "render")

case("arguments_unicode_keys", R([U("x"), A("t", tool_calls=[call("f", '{"ключ": "значение", "键": 1}')])],
                                 add_generation_prompt=False), "render")

case("add_generation_prompt_false", R([U("Q"), A("partial answer")], add_generation_prompt=False), "render")

case("add_generation_prompt_true_explicit", R([U("Q")], add_generation_prompt=True), "render")

case("agp_kwargs_override_false", R([U("Q")], add_generation_prompt=True,
                                    chat_template_kwargs={"add_generation_prompt": False}), "render")
case("agp_kwargs_override_true", R([U("Q")], add_generation_prompt=False,
                                   chat_template_kwargs={"add_generation_prompt": True}), "render")
case("agp_kwargs_zero", R([U("Q")], chat_template_kwargs={"add_generation_prompt": 0}), "render")
case("agp_kwargs_null", R([U("Q")], chat_template_kwargs={"add_generation_prompt": None}), "render")
case("agp_kwargs_nonempty_string", R([U("Q")], add_generation_prompt=False,
                                     chat_template_kwargs={"add_generation_prompt": "no"}), "render")

case("kwargs_unknown_keys_ignored", R([U("Q")], chat_template_kwargs={"foo": 1, "bar": {"x": []}}), "render")
case("kwargs_null", R([U("Q")], chat_template_kwargs=None), "render")

case("tool_message_first", R([T("orphan result"), U("Q")]), "render")
case("tool_messages_first_run", R([T("r1"), T("r2"), U("Q")]), "render")
case("tool_after_system", R([S("s"), T("r1"), U("Q")]), "render")
case("tool_last_then_generation", R([U("Q"), A("", tool_calls=[call("calc", '{"x": 1}')]), T("1")]), "render")
case("tool_runs_separated", R([
    U("Q"),
    A("first", tool_calls=[call("calc", '{"x": 1}'), call("calc", '{"x": 2}')]),
    T("1"), T("2"),
    A("second", reasoning_content="more", tool_calls=[call("calc", '{"x": 3}')]),
    T("3"),
    A("final")], add_generation_prompt=False), "render")
case("tool_then_user", R([U("Q"), A("", tool_calls=[call("calc", "{}")]), T("r"), U("Q2")]), "render")

case("multi_step_user_tool_response", R([
    U("Real question"),
    A("", reasoning_content="call it", tool_calls=[call("calc", '{"x": 1}')]),
    U("<tool_response>\n1\n</tool_response>"),
    A("The answer is 1.", reasoning_content="got it"),
    U("  \n<tool_response>2</tool_response>\u3000"),
]), "render")

case("user_tool_response_prefix_only", R([
    U("Real question"),
    A("a", reasoning_content="r"),
    U("<tool_response> not closed"),
    A("b", reasoning_content="r2")], add_generation_prompt=False), "render")

case("assistant_whitespace_content_with_calls", R([
    U("Q"), A(" \n\u3000 ", tool_calls=[call("calc", '{"x": 1}')])], add_generation_prompt=False), "render")

case("assistant_think_only_with_calls", R([
    U("Q"), A("<think>reason</think>", tool_calls=[call("calc", '{"x": 1}')]),
    U("Q2"), A("<think>r</think>\n\n  text", tool_calls=[call("calc", '{"x": 2}')])],
    add_generation_prompt=False), "render")

case("assistant_before_first_user", R([S("s"), A("hello first", reasoning_content="r0"), U("Q")]), "render")

case("assistant_last_with_generation_prompt", R([U("Q"), A("A", reasoning_content="R")]), "render")

case("extra_fields_ignored", R([
    {"role": "user", "content": "Q", "name": "alice", "extra": [1]},
    {"role": "assistant", "content": "A", "refusal": None, "name": "bot", "audio": None,
     "tool_calls": [], "function_call": None},
    {"role": "user", "content": "Q2"}],
    temperature=0.7, max_tokens=10, stream=True, documents=None), "render")

case("tool_calls_null_and_empty", R([U("Q"), A("x", tool_calls=None), U("Q2"), A("y", tool_calls=[])],
                                    add_generation_prompt=False), "render")

case("long_text_many_messages", R(
    [S("sys " * 50)] + [m for i in range(30) for m in (U("question %d " % i + "ü" * i),
                                                         A("answer %d" % i, reasoning_content="r%d" % i))]
    + [U("final")], chat_template_kwargs={"preserve_thinking": True}), "render")

case("nul_and_controls_in_content", R([U("a\u0000b\u0001c"), A("x\u0000", tool_calls=[
    call("f", '{"v": "nul\\u0000inside"}')])], add_generation_prompt=False), "render")

# ---------------------------------------------------------------- template errors

case("err_no_messages", R([]), "template")
case("err_no_messages_with_tools", R([], tools=[WEATHER]), "template")
case("err_only_system", R([S("s")]), "template")
case("err_only_assistant", R([A("a")]), "template")
case("err_only_tool_response_users", R([U("<tool_response>x</tool_response>"), A("a"),
                                        U(" <tool_response>y</tool_response> ")]), "template")
case("err_system_not_first", R([U("Q"), S("late system")]), "template")
case("err_system_not_first_with_tools", R([U("Q"), S("late")], tools=[WEATHER]), "template")
case("err_system_twice", R([S("a"), S("b"), U("Q")]), "template")
case("err_developer_role", R([{"role": "developer", "content": "d"}, U("Q")]), "template")
case("err_role_case", R([U("Q"), {"role": "Assistant", "content": "a"}]), "template")
case("err_role_empty", R([U("Q"), {"role": "", "content": "a"}]), "template")
case("err_unknown_part_type", R([U([{"type": "input_audio", "input_audio": {"data": "x"}}])]), "template")
case("err_video_url_part", R([U([{"type": "video_url", "video_url": {"url": "v"}}])]), "template")
case("err_empty_part", R([U([{}])]), "template")
case("err_content_number", R([U(5)]), "template")
case("err_content_object", R([U({"type": "text", "text": "x"})]), "template")
case("err_content_bool", R([U("Q"), A(True)]), "template")
case("err_system_image", R([S([{"type": "image_url", "image_url": {"url": "x"}}]), U("Q")]), "template")
case("err_system_video", R([S([{"type": "text", "text": "t"}, {"type": "video", "video": "v"}]), U("Q")]),
     "template")
case("err_system_image_with_tools", R([S([{"type": "image"}]), U("Q")], tools=[WEATHER]), "template")
case("err_system_image_before_no_user", R([S([{"type": "image"}])]), "template")
case("err_system_bad_content_before_no_user", R([S(3.5)]), "template")
case("err_order_content_before_role", R([U("Q"), S(7)]), "template")
case("err_order_late_system_image_is_role_error", R([U("Q"), S([{"type": "image"}])]), "template")
case("err_order_first_bad_message_wins", R([U("Q"), {"role": "developer", "content": "d"}, S("late")]),
     "template")
case("err_order_no_user_before_content", R([A(5)]), "template")
case("err_order_last_user_content_first", R([U("ok"), A("x"), U([{"type": "input_audio"}])]), "template")
case("err_order_earlier_user_not_scanned", R([U({"bad": 1}), A("x"), U("real query")]), "template")
case("err_unknown_role_content_checked_first", R([U("Q"), {"role": "developer", "content": [{"x": 1}]}]),
     "template")

# ---------------------------------------------------------------- request-shape errors

case("req_not_object", ["not", "an", "object"], "request", "request: must be a JSON object")
case("req_messages_missing", {"model": "m"}, "request", "messages: missing")
case("req_messages_not_array", {"messages": "hello"}, "request", "messages: must be an array")
case("req_messages_null", {"messages": None}, "request", "messages: must be an array")
case("req_message_not_object", R(["hello"]), "request", "messages[0]: must be an object")
case("req_role_missing", R([U("Q"), {"content": "no role"}]), "request", "messages[1].role: missing")
case("req_role_not_string", R([{"role": 5, "content": "x"}]), "request", "messages[0].role: must be a string")
case("req_role_null", R([{"role": None, "content": "x"}]), "request", "messages[0].role: must be a string")
case("req_arguments_invalid_json", R([U("Q"), A("", tool_calls=[call("f", '{"city": "Paris"')])]), "request",
     "messages[1].tool_calls[0].function.arguments: not valid JSON")
case("req_arguments_trailing_garbage", R([U("Q"), A("", tool_calls=[call("f", '{"a": 1} x')])]), "request",
     "messages[1].tool_calls[0].function.arguments: not valid JSON")
case("req_arguments_empty_string", R([U("Q"), A("", tool_calls=[call("f", "")])]), "request",
     "messages[1].tool_calls[0].function.arguments: not valid JSON")
case("req_arguments_json_array", R([U("Q"), A("", tool_calls=[call("f", "[1, 2]")])]), "request",
     "messages[1].tool_calls[0].function.arguments: must be a JSON object (got array)")
case("req_arguments_json_string", R([U("Q"), A("", tool_calls=[call("f", '"x"')])]), "request",
     "messages[1].tool_calls[0].function.arguments: must be a JSON object (got string)")
case("req_arguments_null", R([U("Q"), A("", tool_calls=[call("f", None)])]), "request",
     "messages[1].tool_calls[0].function.arguments: must be an object or a JSON string (got null)")
case("req_arguments_number", R([U("Q"), A("", tool_calls=[call("f", 3)])]), "request",
     "messages[1].tool_calls[0].function.arguments: must be an object or a JSON string (got integer)")
case("req_arguments_nan", R([U("Q"), A("", tool_calls=[call("f", '{"x": NaN}')])]), "request",
     "messages[1].tool_calls[0].function.arguments: not valid JSON")
case("req_arguments_bigint", R([U("Q"), A("", tool_calls=[call("f", '{"x": 123456789012345678901234567890}')])]),
     "request", "messages[1].tool_calls[0].function.arguments: not valid JSON")
case("req_bare_arguments_invalid", R([U("Q"), A("", tool_calls=[{"name": "f", "arguments": "{"}])]), "request",
     "messages[1].tool_calls[0].arguments: not valid JSON")
case("req_function_null", R([U("Q"), A("", tool_calls=[{"id": "x", "function": None}])]), "request",
     "messages[1].tool_calls[0].function: must be an object")
case("req_name_missing", R([U("Q"), A("", tool_calls=[{"function": {"arguments": "{}"}}])]), "request",
     "messages[1].tool_calls[0].function.name: missing")
case("req_name_not_string", R([U("Q"), A("", tool_calls=[{"function": {"name": 7, "arguments": "{}"}}])]),
     "request", "messages[1].tool_calls[0].function.name: must be a string")
case("req_bare_name_missing", R([U("Q"), A("", tool_calls=[{"arguments": {}}])]), "request",
     "messages[1].tool_calls[0].name: missing")
case("req_tool_calls_object", R([U("Q"), A("", tool_calls={"name": "f"})]), "request",
     "messages[1].tool_calls: must be an array or null (got object)")
case("req_tool_calls_string", R([U("Q"), A("", tool_calls="f()")]), "request",
     "messages[1].tool_calls: must be an array or null (got string)")
case("req_tool_call_not_object", R([U("Q"), A("", tool_calls=["f"])]), "request",
     "messages[1].tool_calls[0]: must be an object")
case("req_second_call_bad", R([U("Q"), A("", tool_calls=[call("f", "{}"), call("g", "[")])]), "request",
     "messages[1].tool_calls[1].function.arguments: not valid JSON")
case("req_content_part_string", R([U(["hello"])]), "request",
     "messages[0].content[0]: a content part must be an object (got string)")
case("req_content_part_number", R([U([{"type": "text", "text": "a"}, 5])]), "request",
     "messages[0].content[1]: a content part must be an object (got integer)")
case("req_text_not_string", R([U([{"type": "text", "text": None}])]), "request",
     "messages[0].content[0].text: must be a string (got null)")
case("req_text_number", R([U([{"type": "text", "text": 12}])]), "request",
     "messages[0].content[0].text: must be a string (got integer)")
case("req_tools_object", R([U("Q")], tools={"type": "function"}), "request",
     "tools: must be an array or null (got object)")
case("req_tools_string", R([U("Q")], tools="get_weather"), "request",
     "tools: must be an array or null (got string)")
case("req_kwargs_not_object", R([U("Q")], chat_template_kwargs=["enable_thinking"]), "request",
     "chat_template_kwargs: must be an object (got array)")
case("req_kwargs_tools", R([U("Q")], chat_template_kwargs={"tools": [WEATHER]}), "request",
     "chat_template_kwargs.tools: not accepted")
case("req_kwargs_messages", R([U("Q")], chat_template_kwargs={"messages": []}), "request",
     "chat_template_kwargs.messages: not accepted")
case("req_agp_not_bool", R([U("Q")], add_generation_prompt="yes"), "request",
     "add_generation_prompt: must be a boolean (got string)")
case("req_agp_null", R([U("Q")], add_generation_prompt=None), "request",
     "add_generation_prompt: must be a boolean (got null)")
case("req_shape_before_template_error", R([S("only system"), {"content": "no role"}]), "request",
     "messages[1].role: missing")


def build():
    template = make_template()
    out = []
    for c in CASES:
        # Render what the C test will read: the request after a JSON round trip.
        req = json.loads(json.dumps(c["request"]))
        kind, text = render(template, req) if isinstance(req, dict) else ("other", "not a mapping")
        entry = {"name": c["name"], "request": c["request"]}
        if c["expect"] == "render":
            if kind != "render":
                sys.exit("case %s: expected a rendering, the template gave %s: %s" % (c["name"], kind, text))
            entry["rendered"] = text
        elif c["expect"] == "template":
            if kind != "template":
                sys.exit("case %s: expected a template error, got %s: %r" % (c["name"], kind, text[:200]))
            entry["error"] = text
        else:
            entry["error_contains"] = c["error_contains"]
            entry["jinja"] = ("template raised: " + text if kind == "template"
                              else "rendered without error: " + json.dumps(text, ensure_ascii=False)
                              if kind == "render" else text)
        out.append(entry)
    names = [c["name"] for c in out]
    assert len(names) == len(set(names)), "duplicate case names"
    return {
        "_comment": "Generated by tools/gen_chat_golden.py from "
                    "tests/fixtures/templates/qwen3.6-35b-a3b.chat_template.jinja with jinja2 %s in the "
                    "transformers environment; do not edit by hand. 'rendered' and 'error' come from the real "
                    "template; 'error_contains' is lilac's request-shape error and 'jinja' what the template "
                    "would have done instead." % jinja2.__version__,
        "cases": out,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    args = ap.parse_args()
    text = json.dumps(build(), ensure_ascii=True, indent=1) + "\n"
    if args.check:
        with open(OUT, encoding="utf-8") as f:
            same = f.read() == text
        print("%s: %s" % (OUT, "up to date" if same else "DIFFERS"))
        sys.exit(0 if same else 1)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %d cases to %s" % (len(CASES), os.path.relpath(OUT, ROOT)))


if __name__ == "__main__":
    main()
