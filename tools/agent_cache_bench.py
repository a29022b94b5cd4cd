#!/usr/bin/env python3
"""agent_cache_bench.py — drives `lilac serve` through a multi-turn
tool-calling conversation, as an agent harness would, and prints how much of
each prompt the server's prefix cache reused (usage.prompt_tokens_details.
cached_tokens).

The conversation: a system prompt and four tools; three user tasks; each
task runs a loop of assistant turns with tool calls and tool results, then a
final assistant answer.  Every assistant message is sent back exactly as the
server returned it (role, content, reasoning_content, tool_calls).  The tiny
test model writes gibberish and practically never calls a tool, so by
default the script adds the plan's tool call to an assistant turn that has
none (the returned text itself is kept as returned); --verbatim adds nothing,
so the conversation has tool calls only where the model made them.

  python3 tools/agent_cache_bench.py                       # starts ./lilac serve on the tiny model
  python3 tools/agent_cache_bench.py --url http://127.0.0.1:8080 --key KEY
  python3 tools/agent_cache_bench.py --slots 0             # the same without prefix reuse
  python3 tools/agent_cache_bench.py --no-edits            # only the conversation
  python3 tools/agent_cache_bench.py --restart             # restart the server between turns (--cache-dir)
  python3 tools/agent_cache_bench.py --cache-ram 256M      # serve --cache-ram

After the conversation, unless --no-edits, edited histories are sent, as
clients send them (each a request of its own; reported apart):
  edit-last    the last user message reworded (edit / regenerate);
  edit-answer  the first assistant answer's content changed, the rest kept
               up to the last user message;
  truncate     the first task (its user message, tool calls and results)
               dropped, the system prompt kept (context compaction);
  edit-tool    the last tool result of the second task changed (the tool
               run again), everything before it kept;
  retry-step   the second task's last tool call and result dropped (the
               agent retries that step).
The longest snapshot that prefixes each is reused: everything before the
last user message, the first turn up to its assistant header, the system
turn; for the tool edits the second task's assistant header, or with
--cache-ram the step before (superseded snapshots wait in RAM).

--restart: the script starts the server with --cache-dir (a new temporary
directory unless --cache-dir DIR) and restarts it (SIGTERM, start again on
the same directory) before every user task but the first and before the
edited histories; requests marked "*" are the first after a restart.  The
per-tier counters (/health cache.tiers) are summed over the server's lives.

Only the standard library is used.
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlparse

SYSTEM = ("You are a careful coding agent working in a Linux checkout of a C project. Use the tools to inspect "
          "files and run commands before answering. Keep answers short and cite the files you looked at.")
TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "repository path"},
                                                        "max_lines": {"type": "integer"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "run_shell", "description": "Run a shell command in the repository root and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                        "timeout_s": {"type": "number"}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the repository for a regular expression.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"},
                                                        "glob": {"type": "string"}},
                       "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Replace the contents of a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
]
# (user message, [(tool name, arguments, tool result), ...]) — each task ends with a final answer turn
TASKS = [
    ("Why does `make test` fail on a fresh clone? Find out.",
     [("run_shell", {"command": "make test 2>&1 | tail -20"}, "tests/run.sh: 1: .venv/bin/python: not found\nmake: *** [test] Error 1"),
      ("read_file", {"path": "tests/run.sh", "max_lines": 40}, "#!/bin/sh\n# run.sh BUILD LILAC [gpu]\nBUILD=$1\nLILAC=$2\n..."),
      ("search", {"pattern": "venv", "glob": "tests/**"}, "tests/server/run.sh:14: VENV=.venv\ntests/server/run.sh:20: python3 -m venv")]),
    ("Good. Now make the error message clearer when python3-venv is missing.",
     [("read_file", {"path": "tests/server/run.sh"}, "#!/bin/sh\nset -u\nLILAC=${LILAC:-./lilac}\nVENV=.venv\n..."),
      ("write_file", {"path": "tests/server/run.sh", "content": "#!/bin/sh\n# ... clearer message ...\n"}, "ok: 31 lines written"),
      ("run_shell", {"command": "sh tests/server/run.sh 2>&1 | tail -3", "timeout_s": 600}, "17 passed, 0 failed")]),
    ("Thanks. Summarise what you changed in one sentence.", []),
]


def post(url, key, body):
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=h)
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data}")
    return data


def get(url, key, path):
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("GET", path, headers={"Authorization": "Bearer " + key} if key else {})
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    return data


def start_server(args):
    log = tempfile.NamedTemporaryFile(prefix="lilac-serve-", suffix=".log", delete=False)
    cmd = [args.lilac, "serve", "--model", args.model, "--port", "0", "--ctx", str(args.ctx), "--slots",
           str(args.slots), "--quiet"]
    if args.cache_dir:
        cmd += ["--cache-dir", args.cache_dir]
    if args.cache_ram:
        cmd += ["--cache-ram", args.cache_ram]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(2400):
        text = open(log.name, encoding="utf-8", errors="replace").read()
        m = re.search(r"listening on (http://\S+)", text)
        if m:
            return proc, m.group(1), log.name
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("the server did not start:\n" + open(log.name).read())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (default: start one)")
    ap.add_argument("--key", default=os.environ.get("LILAC_API_KEY"))
    ap.add_argument("--lilac", default="./lilac")
    ap.add_argument("--model", default="tests/fixtures/tiny")
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--verbatim", action="store_true", help="never add tool calls the model did not make")
    ap.add_argument("--preserve-thinking", action="store_true", help="chat_template_kwargs.preserve_thinking")
    ap.add_argument("--no-edits", action="store_true", help="skip the edited-history requests")
    ap.add_argument("--restart", action="store_true", help="restart the server (same --cache-dir) between turns")
    ap.add_argument("--cache-dir", help="serve --cache-dir (default with --restart: a new temporary directory)")
    ap.add_argument("--cache-ram", help="serve --cache-ram BYTES")
    args = ap.parse_args()
    if args.restart and args.url:
        raise SystemExit("--restart starts (and restarts) its own server: leave out --url")
    if args.restart and not args.cache_dir:
        args.cache_dir = tempfile.mkdtemp(prefix="lilac-cache-bench-")
    proc = None
    url = args.url
    tier_sum = {}
    restarts = 0
    if not url:
        proc, url, _ = start_server(args)

    def collect_tiers():
        tiers = get(url, args.key, "/health").get("cache", {}).get("tiers", {})
        for name, t in tiers.items():
            acc = tier_sum.setdefault(name, {"hits": 0, "reused_tokens": 0, "evictions": 0})
            for k in acc:
                acc[k] += t.get(k, 0)

    def restart():
        nonlocal proc, url, restarts
        collect_tiers()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        proc, url, _ = start_server(args)
        restarts += 1
    body_extra = {"chat_template_kwargs": {"preserve_thinking": True}} if args.preserve_thinking else {}
    msgs = [{"role": "system", "content": SYSTEM}]
    rows, edits = [], []
    call_no = 0
    t_conv = 0.0
    t_all = time.time()
    fresh = False  # the next request is the first after a restart
    try:
        for ti, (task, steps) in enumerate(TASKS):
            if args.restart and ti > 0:
                restart()
                fresh = True
            msgs.append({"role": "user", "content": task})
            for step in range(len(steps) + 1):
                t0 = time.time()
                r = post(url, args.key, {"model": "any", "messages": msgs, "tools": TOOLS, "temperature": 0,
                                         "max_tokens": args.max_tokens, **body_extra})
                dt = time.time() - t0
                m = r["choices"][0]["message"]
                u = r["usage"]
                rows.append((len(rows) + 1, msgs[-1]["role"] + ("*" if fresh else ""), u["prompt_tokens"],
                             u["prompt_tokens_details"]["cached_tokens"], u["completion_tokens"],
                             r["choices"][0]["finish_reason"], dt))
                fresh = False
                back = {"role": "assistant", "content": m.get("content")}  # exactly as returned
                if m.get("reasoning_content") is not None:
                    back["reasoning_content"] = m["reasoning_content"]
                calls = list(m.get("tool_calls") or [])
                results = []
                for tc in calls:  # the model's own calls get a generic result
                    results.append({"role": "tool", "tool_call_id": tc["id"], "content": "error: unknown tool call"})
                if step < len(steps) and not calls and not args.verbatim:
                    name, arguments, result = steps[step]
                    call_no += 1
                    cid = f"call_{call_no:024d}"
                    calls = [{"id": cid, "type": "function",
                              "function": {"name": name, "arguments": json.dumps(arguments)}}]
                    results = [{"role": "tool", "tool_call_id": cid, "content": result}]
                if calls:
                    back["tool_calls"] = calls
                msgs.append(back)
                msgs.extend(results)
                if not results:
                    break
        t_conv = time.time() - t_all
        if not args.no_edits:
            if args.restart:
                restart()
            user_at = [i for i, m in enumerate(msgs) if m["role"] == "user"]
            first_asst = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
            last_user = user_at[-1]
            answer = dict(msgs[first_asst], content="(an edited answer) " + (msgs[first_asst].get("content") or ""))
            # the second task's tool loop: its last tool result, and the step that made it
            loop = msgs[:last_user]
            last_tool = max((i for i, m in enumerate(loop) if m["role"] == "tool"), default=None)
            cases = [
                ("edit-last", msgs[:last_user] + [{"role": "user", "content": msgs[last_user]["content"] + " Reworded."}]),
                ("edit-answer", msgs[:first_asst] + [answer] + msgs[first_asst + 1:last_user + 1]),
                ("truncate", [msgs[0]] + msgs[user_at[1]:last_user + 1]),
            ]
            if last_tool is not None and loop[last_tool - 1]["role"] == "assistant":
                cases += [
                    ("edit-tool", loop[:last_tool] + [dict(loop[last_tool], content="(tool run again) 16 passed, 1 failed")]),
                    ("retry-step", loop[:last_tool - 1]),
                ]
            for name, body_msgs in cases:
                t0 = time.time()
                r = post(url, args.key, {"model": "any", "messages": body_msgs, "tools": TOOLS, "temperature": 0,
                                         "max_tokens": args.max_tokens, **body_extra})
                u = r["usage"]
                edits.append((name, u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"],
                              u["completion_tokens"], r["choices"][0]["finish_reason"], time.time() - t0))
    finally:
        if proc:
            if proc.poll() is None:
                try:
                    collect_tiers()
                except OSError:
                    pass
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    total_p = sum(r[2] for r in rows)
    total_c = sum(r[3] for r in rows)
    hits = sum(1 for r in rows if r[3] > 0)
    print(f"{'req':>3} {'after':>9} {'prompt':>7} {'cached':>7} {'new':>6} {'gen':>4} {'finish':>10} {'time':>7}")
    for n, role, p, c, g, fin, dt in rows:
        print(f"{n:>3} {role:>9} {p:>7} {c:>7} {p - c:>6} {g:>4} {fin:>10} {dt:>6.2f}s")
    print(f"requests: {len(rows)}, cache hits: {hits}/{len(rows)} ({100.0 * hits / len(rows):.0f}%), "
          f"prompt tokens: {total_p}, reused: {total_c} ({100.0 * total_c / max(total_p, 1):.1f}%), "
          f"prefilled: {total_p - total_c}, wall: {t_conv:.1f} s"
          f"{' (verbatim)' if args.verbatim else ''}{' (preserve_thinking)' if args.preserve_thinking else ''}"
          f"{f' ({restarts} restarts)' if restarts else ''}")
    if args.restart:
        after = [r for r in rows if r[1].endswith("*")]
        ap_, ac_ = sum(r[2] for r in after), sum(r[3] for r in after)
        print(f"first requests after a restart: {len(after)}, reused: {ac_} of {ap_} prompt tokens "
              f"({100.0 * ac_ / max(ap_, 1):.1f}%)")
    if edits:
        print(f"{'edited':>11} {'prompt':>7} {'cached':>7} {'new':>6} {'gen':>4} {'finish':>10} {'time':>7}")
        for name, p, c, g, fin, dt in edits:
            print(f"{name:>11} {p:>7} {c:>7} {p - c:>6} {g:>4} {fin:>10} {dt:>6.2f}s")
        ep, ec = sum(e[1] for e in edits), sum(e[2] for e in edits)
        print(f"edited histories: {len(edits)}, cache hits: {sum(1 for e in edits if e[2] > 0)}/{len(edits)}, "
              f"prompt tokens: {ep}, reused: {ec} ({100.0 * ec / max(ep, 1):.1f}%), prefilled: {ep - ec}"
              f"{' (after a restart)' if args.restart else ''}")
    if tier_sum:
        print("reused by tier: " + ", ".join(f"{name} {t['hits']} hits / {t['reused_tokens']} tokens"
                                             f" ({t['evictions']} evictions)" for name, t in tier_sum.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
