#!/usr/bin/env python3
"""chat_pty.py — `lilac chat` through a pseudo-terminal, as a person uses it,
on the tiny fixture (greedy, so answers repeat): multi-turn, /stats and the
cached-token reuse between turns, /reset (the same first answer again, from
the cache), line editing and history, Ctrl-C at the prompt (the line is
dropped) and during an answer (the answer stops, the program stays), /system,
/save and /load (chat-completions JSON), /think, and Ctrl-D (exit 0).  Then
the same binary with stdin not a terminal: one message per line; and the
progress bar of a long prefill (`lilac generate`) on a terminal.

Usage: chat_pty.py LILAC   (prints "ok ..." lines; exits 1 on the first failure)
"""
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import fcntl
import time

LILAC = sys.argv[1] if len(sys.argv) > 1 else "./lilac"
TINY = "tests/fixtures/tiny"
TMP = tempfile.mkdtemp(prefix="lilac-chat-test-")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# a fresh, empty prompt: the editor's first draw puts the cursor after it
# (redraws while typing show the prompt followed by the text instead)
PROMPT = "\x1b[1m>\x1b[0m \r\x1b[2C"


class Chat:
    def __init__(self, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(LILAC, [LILAC, "--threads", "2", "chat", "--model", TINY, *args])
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
        self.out = ""
        self.wait_prompt(120)

    def read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if not data:
            raise EOFError("chat exited:\n" + self.out[-2000:])
        self.out += data.decode("utf-8", "replace")
        return True

    def wait_for(self, pattern, timeout=60, start=0):
        deadline = time.time() + timeout
        while True:
            idx = self.out.find(pattern, start)
            if idx >= 0:
                return idx
            if time.time() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r}; output:\n{self.out[-3000:]!r}")
            self.read(0.2)

    def wait_prompt(self, timeout=60):
        self.mark = self.wait_for(PROMPT, timeout, getattr(self, "mark", -len(PROMPT)) + len(PROMPT))

    def send(self, keys, wait=True, timeout=120):
        """Types keys; with wait, returns the screen text printed until the next prompt (ANSI removed)."""
        start = len(self.out)
        os.write(self.fd, keys.encode())
        if not wait:
            return None
        self.wait_prompt(timeout)
        return ANSI.sub("", self.out[start:self.mark])

    def stats(self):
        text = self.send("/stats\r")
        m = re.search(r"prompt (\d+) tokens \((\d+) cached, (\d+) prefilled\), generated (\d+) tokens", text)
        assert m, text
        return tuple(map(int, m.groups()))

    def finish(self):
        os.write(self.fd, b"\x04")  # Ctrl-D on an empty line
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                self.read(0.2)
            except EOFError:
                break
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def answer_of(screen, typed):
    """The answer in a screen chunk: what follows the echoed input line."""
    lines = screen.replace("\r", "").split("\n")
    i = next(k for k, l in enumerate(lines) if typed in l)
    return "\n".join(lines[i + 1:]).strip("\n")


def ok(what):
    print(f"  ok   {what}", flush=True)


def main():
    c = Chat("--temperature", "0", "--no-think", "-n", "24", "--ctx", "2048")
    a1 = answer_of(c.send("hello there\r"), "hello there")
    assert a1, "an answer was printed"
    p1, c1, f1, g1 = c.stats()
    assert c1 == 0 and f1 == p1 and 0 < g1 <= 24, (p1, c1, f1, g1)
    ok(f"first turn: {p1} prompt tokens prefilled, {g1} generated")
    c.send("how are you\r")
    p2, c2, f2, g2 = c.stats()
    # the second turn starts from the first one's state: only the previous
    # answer (as the template re-renders it) and the new message are prefilled
    assert p2 > p1 and c2 >= p1 - 8 and f2 == p2 - c2 and f2 < p2 - p1 + g1 + 8, (p1, p2, c2, f2)
    ok(f"second turn reuses {c2} tokens, prefills {f2} of {p2}")
    assert "new conversation" in c.send("/reset\r")
    a3 = answer_of(c.send("hello there\r"), "hello there")
    p3, c3, f3, _ = c.stats()
    assert a3 == a1 and p3 == p1 and c3 > 0 and f3 < p3, (a1, a3, p3, c3)
    ok("/reset: the same first answer, its prompt from the cache")
    # line editing: left arrows and an insertion, backspace, history (Up)
    c.send("hello wrld\x1b[D\x1b[D\x1b[Do\x1b[Fx\x7f\r")
    c.send("/stats\r")
    again = c.send("\x1b[A\r")  # Up recalls "/stats"
    assert "prompt" in again and "cached" in again, again
    c.send("dropped line\x03", wait=True)  # Ctrl-C at the prompt drops the line
    c.send("/system Be brief.\r")
    path = os.path.join(TMP, "conv.json")
    assert "saved" in c.send(f"/save {path}\r")
    conv = json.load(open(path))
    msgs = conv["messages"]
    users = [m["content"] for m in msgs if m["role"] == "user"]
    assert msgs[0] == {"role": "system", "content": "Be brief."}, msgs[0]
    assert users == ["hello there", "hello world"], users
    assert conv["chat_template_kwargs"] == {"enable_thinking": False}
    assert all(m["role"] in ("system", "user", "assistant") for m in msgs) and msgs[-1]["role"] == "assistant"
    ok("line editing, history, Ctrl-C at the prompt, /system, /save")
    c.send("/reset\r")
    assert "loaded 5 messages" in c.send(f"/load {path}\r")
    c.send("and then?\r")
    p5, _, _, _ = c.stats()
    assert p5 > p2, (p5, p2)  # the loaded conversation is in the prompt
    path2 = os.path.join(TMP, "conv2.json")
    c.send(f"/save {path2}\r")
    msgs2 = json.load(open(path2))["messages"]
    assert msgs2[:len(msgs)] == msgs and msgs2[len(msgs)]["content"] == "and then?", msgs2
    assert "thinking on" in c.send("/think\r")
    assert "/reset" in c.send("/help\r")
    assert "unknown command" in c.send("/nope\r")
    assert c.finish() == 0
    ok("/load continues a saved conversation; /think, /help; Ctrl-D exits 0")

    # Ctrl-C during an answer: it stops, and the program takes the next message
    c = Chat("--temperature", "0", "--ignore-eos", "-n", "100000", "--ctx", "4096")
    start = len(c.out)
    c.send("write forever\r", wait=False)
    c.wait_for("\x1b[2m", 60, start)  # the (dimmed) reasoning started streaming
    time.sleep(0.5)
    t0 = time.time()
    os.write(c.fd, b"\x03")
    c.wait_prompt(60)
    screen = ANSI.sub("", c.out[start:c.mark])
    assert "[stopped]" in screen and time.time() - t0 < 30, screen[-500:]
    _, _, _, g = c.stats()
    assert 0 < g < 4000, g
    assert "thinking off" in c.send("/think\r")  # the program still takes commands
    assert c.finish() == 0
    ok(f"Ctrl-C stopped an answer after {g} tokens; the program went on; exit 0")

    # not a terminal: one message per line, answers only
    p = subprocess.run([LILAC, "--threads", "2", "chat", "--model", TINY, "--temperature", "0", "--no-think", "-n", "24",
                        "--ctx", "2048"], input=b"hello there\n/stats\nhow are you\n", capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("utf-8", "replace")
    assert out.startswith(a1 + "\n"), (out, a1)
    assert re.search(r"prompt \d+ tokens \(0 cached", out) and out.count("\n\n") >= 2, out
    ok("stdin not a terminal: one message per line")
    progress()



def run_pty(args, timeout=300):
    """Runs LILAC args with stdout and stderr on a pseudo-terminal; returns (exit code, output)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(LILAC, [LILAC, *args])
    out, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def progress():
    """A long prefill shows a bar on a terminal, a summary line at its end, and nothing with --quiet."""
    ids = os.path.join(TMP, "ids.txt")
    with open(ids, "w") as f:
        f.write(" ".join(str(7 + i % 400) for i in range(3000)))
    args = ["--threads", "2", "generate", "--model", TINY, "--ids", "@" + ids, "-n", "1", "--print-ids", "--chunk", "64"]
    rc, out = run_pty(args)
    assert rc == 0, out
    assert re.search(r"\r\x1b\[Kprefill \[[=> ]{24}\] +\d+%  \d+/3000 tokens  \d+ tokens/s", out), repr(out[:600])
    assert re.search(r"prefill: 3000 tokens in [0-9.]+ s, \d+ tokens/s\r?\n", out), repr(out[-300:])
    rc, out = run_pty(args + ["--quiet"])
    assert rc == 0 and "prefill" not in out, repr(out)
    ok("a long prefill shows a progress bar on a terminal, none with --quiet")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        print(f"FAIL: chat: {e}")
        sys.exit(1)
