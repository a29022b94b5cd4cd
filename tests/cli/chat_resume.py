#!/usr/bin/env python3
"""chat_resume.py — `lilac chat --cache-dir DIR` and `--resume` on the tiny
fixture (greedy, stdin not a terminal: one message or command per line):

  - a conversation of two turns, then a new process with --resume: the
    third turn reuses the cached snapshots (the count the resume line
    announced, the same as one process running all three turns, and more
    than zero), and its answer equals that process's and a cold one's
    (/load of the same messages with no cache);
  - DIR/chat.json truncated, corrupted, of another model, of another
    format version, not a conversation file, or with bad messages: one
    warning line naming the file and why, then a new conversation;
  - a run that changes nothing leaves chat.json as it was; /reset saves
    the empty conversation;
  - no chat.json: a note, no warning; snapshots corrupted: one warning each
    when tried, the answer still the cold one;
  - --resume and --cache-disk need --cache-dir; --no-think and --system
    given with --resume win over the saved ones.

Usage: chat_resume.py LILAC   (prints "ok ..." lines; exits 1 on the first failure)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LILAC = sys.argv[1] if len(sys.argv) > 1 else "./lilac"
TINY = "tests/fixtures/tiny"
TMP = tempfile.mkdtemp(prefix="lilac-chat-resume-")
BASE = ["--threads", "2", "chat", "--model", TINY, "--temperature", "0", "-n", "8", "--ctx", "2048"]
STATS = re.compile(r"prompt (\d+) tokens \((\d+) cached, (\d+) prefilled\), generated (\d+) tokens")


def chat(lines, *args, rc=0):
    """Runs chat with lines on stdin, then /save; returns (the assistant
    messages saved, with their reasoning: scripts are not shown it),
    [(prompt, cached, prefilled, generated)] of each /stats, stderr)."""
    save = os.path.join(TMP, "saved.json")
    if os.path.exists(save):
        os.unlink(save)
    lines = [*lines, "/save " + save]
    p = subprocess.run([LILAC, *BASE, *args], input="".join(l + "\n" for l in lines).encode(), capture_output=True,
                       timeout=300)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == rc, (args, p.returncode, err)
    out = p.stdout.decode("utf-8", "replace")
    stats = [tuple(map(int, m.groups())) for m in STATS.finditer(out)]
    answers = [m for m in json.load(open(save))["messages"] if m["role"] == "assistant"] if rc == 0 else []
    return answers, stats, err


def warnings(err):
    return [l for l in err.splitlines() if "warning" in l]


def ok(what):
    print(f"  ok   {what}", flush=True)


TURNS = ["hello there", "how are you", "and then?"]


def main():
    # one process, three turns: the reference
    ref, ref_stats, _ = chat([TURNS[0], "/stats", TURNS[1], "/stats", TURNS[2], "/stats"])
    assert len(ref) == 3 and len(ref_stats) == 3 and all(a.get("reasoning_content") for a in ref), (ref, ref_stats)
    ok(f"reference: three turns in one process, the third reusing {ref_stats[2][1]} tokens")

    d = os.path.join(TMP, "cache")
    two, _, err = chat([TURNS[0], TURNS[1]], "--cache-dir", d)
    assert two == ref[:2], (two, ref)
    saved = open(os.path.join(d, "chat.json"), "rb").read()
    head, body = saved.split(b"\n", 1)
    h = json.loads(head)
    assert h["lilac_chat"] == 1 and h["bytes"] == len(body) and re.fullmatch(r"[0-9a-f]{16}", h["model"]), h
    assert h["xxh64"] == "%016x" % xxh64(body), (h, xxh64(body))
    msgs = json.loads(body)["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"], msgs
    snaps = glob.glob(os.path.join(d, "*.lsnap"))
    assert snaps and "written" in err and not warnings(err), err
    ok(f"--cache-dir: chat.json ({len(body)} bytes of messages) and {len(snaps)} snapshots written")

    # a run on the directory that changes nothing (no --resume, no turn) leaves chat.json alone
    chat(["/stats"], "--cache-dir", d)
    assert open(os.path.join(d, "chat.json"), "rb").read() == saved
    third, stats, err = chat([TURNS[2], "/stats"], "--cache-dir", d, "--resume")
    m = re.search(r"resumed 4 messages from (\S+) \(thinking on\); the next turn reuses (\d+) cached tokens", err)
    assert m and m.group(1) == os.path.join(d, "chat.json"), err
    announced = int(m.group(2))
    assert third == ref, (third, ref)  # the resumed two and the new one
    p, cached, prefilled, _ = stats[0]
    assert p == ref_stats[2][0] and cached == announced == ref_stats[2][1] > 0 and prefilled == p - cached, \
        (stats, ref_stats, announced)
    assert not warnings(err), err
    ok(f"--resume: the third turn reuses {cached} of {p} tokens (as announced, as in one process), same answer")

    # cold: the same messages loaded with no cache at all
    conv = os.path.join(TMP, "conv.json")
    open(conv, "wb").write(body)
    cold, cstats, _ = chat([f"/load {conv}", TURNS[2], "/stats"])
    assert cold == ref and cstats[0][1] == 0 and cstats[0][0] == p, (cold, cstats)
    ok("the resumed answer equals a cold run's (no cache)")

    # bad conversation files: one warning naming the file and why; a new conversation
    path = os.path.join(d, "chat.json")
    good = open(path, "rb").read()
    other = json.loads(head)
    other["model"] = "%016x" % (int(other["model"], 16) ^ 1)
    newer = dict(json.loads(head), lilac_chat=2)
    bad_msgs = json.dumps({"messages": [7]}).encode() + b"\n"
    cases = [
        ("truncated", good[:-10], "truncated or extended"),
        ("extended", good + b"x", "truncated or extended"),
        ("corrupt", good[:len(head) + 20] + bytes([good[len(head) + 20] ^ 0x20]) + good[len(head) + 21:], "checksum mismatch"),
        ("other model", json.dumps(other).encode() + b"\n" + body, "another model"),
        ("other version", json.dumps(newer).encode() + b"\n" + body, "format version 2"),
        ("not ours", b"hello, world\n", "not a lilac conversation file"),
        ("empty", b"", "not a lilac conversation file"),
    ]
    for name, data, why in cases:
        open(path, "wb").write(data)
        ans, st, err = chat([TURNS[0], "/stats"], "--cache-dir", d, "--resume")
        w = warnings(err)
        assert len(w) == 1 and path in w[0] and why in w[0] and "a new conversation" in w[0], (name, err)
        assert ans == ref[:1] and st[0][0] == ref_stats[0][0], (name, ans, st)  # a fresh first turn
    # valid framing, messages that are not messages
    hdr = {"lilac_chat": 1, "model": h["model"], "bytes": len(bad_msgs), "xxh64": "%016x" % xxh64(bad_msgs)}
    open(path, "wb").write(json.dumps(hdr).encode() + b"\n" + bad_msgs)
    _, _, err = chat([TURNS[0]], "--cache-dir", d, "--resume")
    w = warnings(err)
    assert len(w) == 1 and "messages[0] is not an object" in w[0], err
    ok(f"bad chat.json ({len(cases) + 1} kinds): one warning line each, a new conversation")

    open(path, "wb").write(good)
    chat(["/reset"], "--cache-dir", d, "--resume")
    _, _, err = chat([], "--cache-dir", d, "--resume")
    assert "resumed 0 messages" in err, err
    ok("a run that changes nothing leaves chat.json alone; /reset saves the empty conversation")

    os.unlink(path)
    _, _, err = chat([TURNS[0]], "--cache-dir", d, "--resume")
    assert "nothing to resume" in err and not warnings(err), err
    ok("no chat.json: a note, no warning")

    # corrupt snapshots: each tried one is one warning; the answer is the cold one
    d2 = os.path.join(TMP, "cache2")
    chat([TURNS[0], TURNS[1]], "--cache-dir", d2)
    for f in glob.glob(os.path.join(d2, "*.lsnap")):
        with open(f, "r+b") as fh:
            fh.seek(os.path.getsize(f) - 100)
            b = fh.read(1)
            fh.seek(os.path.getsize(f) - 100)
            fh.write(bytes([b[0] ^ 0x5A]))
    third, stats, err = chat([TURNS[2], "/stats"], "--cache-dir", d2, "--resume")
    w = warnings(err)
    assert third == ref and w and all("checksum" in x and "prefix cache" in x for x in w), (third, err)
    assert len(w) == len(set(w)), w
    ok(f"corrupt snapshots: {len(w)} warning line(s), the cold answer")

    # flags
    _, _, err = chat([], "--resume", rc=2)
    assert "--resume needs --cache-dir" in err, err
    _, _, err = chat([], "--cache-disk", "1G", rc=2)
    assert "--cache-disk needs --cache-dir" in err, err
    _, _, err = chat([], "--cache-dir", d2, "--cache-disk", "nope", rc=2)
    assert "expected a positive byte count" in err, err
    _, _, err = chat([], "--cache-dir", d2, "--resume", "--no-think", "--system", "Be brief.")
    assert "(thinking off)" in err, err
    s = json.load(open(os.path.join(TMP, "saved.json")))
    assert s["messages"][0] == {"role": "system", "content": "Be brief."} and \
        s["chat_template_kwargs"] == {"enable_thinking": False}, s
    ok("--resume/--cache-disk need --cache-dir; --no-think and --system win over the resumed ones")
    shutil.rmtree(TMP, ignore_errors=True)


def xxh64(data, seed=0):
    """XXH64 (reference values in tests/unit/test_snapshot.c; checked here against the header lilac wrote)."""
    P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                          0x27D4EB2F165667C5)
    M = (1 << 64) - 1
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M
    rnd = lambda acc, x: (rotl((acc + x * P2) & M, 31) * P1) & M
    merge = lambda acc, v: ((acc ^ rnd(0, v)) * P1 + P4) & M
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(data[i + 8 * k:i + 8 * k + 8], "little"))
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for k in range(4):
            h = merge(h, v[k])
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, int.from_bytes(data[i:i + 8], "little")), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * P1) & M, 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5) & M, 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    h ^= h >> 32
    return h


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print(f"FAIL: chat resume: {e}")
        sys.exit(1)
