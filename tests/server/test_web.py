"""test_web.py — the web chat page at / in headless Chromium (Debian's
`chromium`), driven over the DevTools protocol on a pipe (no extra Python
package): the page loads, its selftest (/#selftest) streams an answer from the
tiny model through /v1/chat/completions and stops a second one with the Stop
button, the conversation is in localStorage, and the API key given to the page
is used.  Writes a 1200x800 screenshot ($LILAC_WEB_SCREENSHOT, else in the
suite's temporary directory) when the page passes.  SKIP, with
the reason, when Chromium is not installed (apt-get install chromium)."""
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import test_server as T

# where the screenshot goes (docs/web-chat.png was made with LILAC_WEB_SCREENSHOT=docs/web-chat.png)
SHOT = os.environ.get("LILAC_WEB_SCREENSHOT") or os.path.join(T.TMP, "web-chat.png")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class CDP:
    """Chromium with --remote-debugging-pipe: JSON messages, NUL-terminated, on fds 3 (in) and 4 (out)."""

    def __init__(self, exe):
        self.prof = tempfile.mkdtemp(prefix="lilac-chromium-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # Chromium reads fd 3 and writes fd 4: the ends are first moved to fds
        # of 20 and up (closed at exec), so the dup2s cannot clobber each other.
        hr, hw = fcntl.fcntl(to_r, fcntl.F_DUPFD_CLOEXEC, 20), fcntl.fcntl(from_w, fcntl.F_DUPFD_CLOEXEC, 20)
        for fd in (to_r, from_w):
            os.close(fd)

        def fds():
            os.dup2(hr, 3)
            os.dup2(hw, 4)

        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
                f"--user-data-dir={self.prof}", "about:blank"]
        self.p = subprocess.Popen([exe, *args], preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(hr)
        os.close(hw)
        self.buf, self.n = b"", 0

    def call(self, method, params=None, session=None, timeout=60):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                r = json.loads(raw)
                if r.get("id") == self.n:
                    if "error" in r:
                        raise RuntimeError(f"{method}: {r['error']}")
                    return r["result"]
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited")
            self.buf += chunk
        raise TimeoutError(method)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001
            pass
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
        os.close(self.to_w)
        os.close(self.from_r)
        shutil.rmtree(self.prof, ignore_errors=True)


@T.test
def web_chat_page():
    srv = T.S["main"]
    st, hd, body = T.raw(srv, "GET", "/", headers={"Authorization": ""})  # the page itself needs no key
    assert st == 200 and hd["content-type"].startswith("text/html"), (st, hd)
    page = body.decode()
    assert "<title>lilac</title>" in page and "/v1/chat/completions" in page
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|<img|@import|url\(", page), "self-contained: nothing loaded"
    exe = chromium()
    if not exe:
        print("  SKIP web_chat_page in Chromium: chromium is not installed (apt-get install chromium)")
        return
    b = CDP(exe)
    try:
        tid = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        b.call("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 800, "deviceScaleFactor": 1, "mobile": False},
               session=s)
        b.call("Page.enable", session=s)
        b.call("Page.navigate", {"url": f"{srv.url}/#selftest&key={T.KEY}"}, session=s)
        deadline, out = time.time() + 240, None
        while time.time() < deadline:
            r = b.call("Runtime.evaluate", {"expression": "document.title === 'selftest done' ? "
                                            "document.getElementById('selftest').textContent : ''",
                                            "returnByValue": True}, session=s)
            if r["result"].get("value"):
                out = json.loads(r["result"]["value"])
                break
            time.sleep(0.5)
        assert out, "the selftest did not finish"
        assert out.get("ok"), out
        a = out["answer"]
        assert a["error"] is None and (a["content"] or a["reasoning"]), a
        assert a["stats"] and "tokens" in a["stats"] and "prompt" in a["stats"], a  # the usage chunk arrived
        assert out["rendered"] == 1
        assert out["stopped"]["error"] == "stopped" and out["stopped"]["chars"] > 0, out["stopped"]
        assert out["stored"] == 4, out  # two questions, two answers in localStorage
        assert out["markdown"] == ('<h1>T</h1><p><strong>b</strong> and <em>i</em> <code>a&lt;b</code></p><ul><li>x</li>'
                                   '<li>y</li></ul><pre><code class="lang-js">if (a &lt; b) {}</code></pre>'
                                   '<p><a href="https://e.x/?a=1" target="_blank" rel="noopener">l</a></p>'), out["markdown"]
        # the stopped request was cancelled on the server, not left running
        t0 = time.time()
        while T.health(srv)["queue"]["running"] and time.time() - t0 < 30:
            time.sleep(0.1)
        assert not T.health(srv)["queue"]["running"]
        b.call("Runtime.evaluate", {"expression": "document.getElementById('settings').open = true"}, session=s)
        png = base64.b64decode(b.call("Page.captureScreenshot", {"format": "png"}, session=s)["data"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        os.makedirs(os.path.dirname(SHOT) or ".", exist_ok=True)
        with open(SHOT, "wb") as f:
            f.write(png)
        print(f"  web page screenshot: {SHOT}")
    finally:
        b.close()
