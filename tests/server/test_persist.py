"""test_persist.py — `lilac serve --cache-dir`: prefix-cache snapshots
survive a restart.  Registered into test_server.py's list; uses its S["plain"]
server (--slots 0) for cold answers and starts its own servers on one
directory in turn:

  A: a three-turn conversation, then SIGTERM (the slots go to disk);
  B: restarted on the same directory, the next turn and a repeat of an
     earlier request reuse cached tokens on their first request, and the
     greedy answers equal the cold server's;
  C: every snapshot in the directory corrupted in its state, plus a file of
     another model and a file that is not a snapshot: one warning line per
     file, the corrupt ones deleted when tried, the others left alone, and
     the answers still equal the cold server's;
  D: --cache-disk smaller than two snapshots keeps the directory under it.
"""
import glob
import os

import test_server as T


def persisted(d):
    return sorted(glob.glob(os.path.join(d, "*.lsnap")))


def conversation(client, turns):
    convo = [T.SYSTEM, T.user("Plan a trip to Rome.")]
    answers = []
    for turn in range(turns):
        r = T.chat(client, convo, max_tokens=8)
        answers.append(T.message_of(r))
        convo += [T.message_of(r), T.user(f"And on day {turn + 2}?")]
    return convo, answers


@T.test
def cache_dir_survives_restart():
    d = os.path.join(T.TMP, "cache-dir")
    plain = T.S["plain"].client()
    args = ("--ctx", "4096", "--slots", "4", "--cache-dir", d)

    a = T.Server("persist-a", *args, quiet=False)
    convo, answers = conversation(a.client(), 3)
    first = T.chat(a.client(), convo[:2], max_tokens=8)
    rc = a.stop()
    assert rc == 0, (rc, a.read_log()[-3000:])
    files = persisted(d)
    assert files, os.listdir(d)
    assert not [f for f in os.listdir(d) if ".tmp." in f], os.listdir(d)
    assert "written" in a.read_log(), a.read_log()[-2000:]

    b = T.Server("persist-b", *args, quiet=False)
    log = b.read_log()
    assert f"{len(files)} snapshot" in log, log
    assert "warning" not in log, log
    r = T.chat(b.client(), convo, max_tokens=8)  # the first request after the restart
    cold = T.chat(plain, convo, max_tokens=8)
    assert r.usage.prompt_tokens_details.cached_tokens > 0, r.usage
    assert T.message_of(r) == T.message_of(cold), (T.message_of(r), T.message_of(cold))
    assert r.usage.prompt_tokens == cold.usage.prompt_tokens
    again = T.chat(b.client(), convo[:2], max_tokens=8)
    assert T.message_of(again) == T.message_of(first) == answers[0]
    assert again.usage.prompt_tokens_details.cached_tokens > 0, again.usage
    rc = b.stop()
    assert rc == 0, (rc, b.read_log()[-3000:])
    assert "warning" not in b.read_log(), b.read_log()

    # C: corrupt every snapshot's state; add another model's and a non-snapshot
    files = persisted(d)
    for f in files:
        with open(f, "r+b") as fh:
            size = os.path.getsize(f)
            fh.seek(size - 200)
            byte = fh.read(1)
            fh.seek(size - 200)
            fh.write(bytes([byte[0] ^ 0x5A]))
    other = os.path.join(d, "other-model.lsnap")
    with open(files[0], "rb") as fh:
        data = bytearray(fh.read())
    data[16] ^= 0xFF  # the model identity
    with open(other, "wb") as fh:
        fh.write(data)
    junk = os.path.join(d, "junk.lsnap")
    with open(junk, "wb") as fh:
        fh.write(b"not a snapshot at all" * 10)
    c = T.Server("persist-c", *args, quiet=False)
    r = T.chat(c.client(), convo, max_tokens=8)
    assert T.message_of(r) == T.message_of(cold), (T.message_of(r), T.message_of(cold))
    r2 = T.chat(c.client(), convo[:2], max_tokens=8)
    assert T.message_of(r2) == answers[0]
    assert T.health(c)["status"] == "ok"
    rc = c.stop()
    log = c.read_log()
    assert rc == 0, (rc, log[-3000:])
    warnings = [line for line in log.splitlines() if "warning" in line]
    for f in [other, junk]:
        n = sum(os.path.basename(f) in w for w in warnings)
        assert n == 1, (f, n, warnings)
        assert os.path.exists(f), f  # not ours to delete
    assert "another model" in "".join(w for w in warnings if "other-model" in w), warnings
    tried = [f for f in files if any(os.path.basename(f) in w for w in warnings)]
    assert tried, (files, warnings)  # the prompt's snapshots were tried
    for f in files:
        n = sum(os.path.basename(f) in w for w in warnings)
        assert n <= 1, (f, warnings)
        if n:
            assert "checksum" in [w for w in warnings if os.path.basename(f) in w][0], warnings
    assert len(warnings) == 2 + len(tried), warnings

    # D: a small --cache-disk bound holds
    d2 = os.path.join(T.TMP, "cache-dir-small")
    one = os.path.getsize(persisted(d)[0]) if persisted(d) else 300000
    bound = int(one * 1.5)
    e = T.Server("persist-d", "--ctx", "4096", "--slots", "2", "--cache-dir", d2, "--cache-disk", str(bound))
    for i in range(4):
        T.chat(e.client(), [T.SYSTEM, T.user(f"Question number {i}?")], max_tokens=4)
    rc = e.stop()
    assert rc == 0, (rc, e.read_log()[-3000:])
    total = sum(os.path.getsize(f) for f in persisted(d2))
    assert 0 < total <= bound, (total, bound, persisted(d2))
