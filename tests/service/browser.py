"""A real browser for the tests of what a person looks at: Debian's headless chromium, driven over the Chrome DevTools
Protocol on a pipe (``--remote-debugging-pipe``: JSON messages ended by NUL on file descriptors 3 and 4, so no
websocket client is needed). Enough of the protocol to open a page, run a script in it and read what it shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    pass


def _as_3_and_4(read_end: int, write_end: int) -> None:
    """In the child before chromium starts: ``read_end`` as fd 3 and ``write_end`` as fd 4, inherited (either may
    be 3 or 4 already, so both are copied out of the way first)."""
    a, b = os.dup(read_end), os.dup(write_end)
    for fd, target in ((a, 3), (b, 4)):
        if fd != target:
            os.dup2(fd, target)
        os.set_inheritable(target, True)


class Browser:
    """One headless chromium with one page; ``with Browser() as b: b.open(url); b.js("document.title")``. Every host
    name but 127.0.0.1 fails to resolve: the page must need nothing from outside."""

    def __init__(self, width: int = 1200, height: int = 900) -> None:
        if CHROMIUM is None:
            raise BrowserError("no chromium here")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # chromium reads commands on fd 3 and writes answers on fd 4
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", f"--window-size={width},{height}",
                "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # every other descriptor of ours is close-on-exec already (PEP 446)
            preexec_fn=lambda: _as_3_and_4(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session = ""
        self.console: list[str] = []
        pages = [t for t in self.call("Target.getTargets", browser=True)["targetInfos"] if t["type"] == "page"]
        self.session = self.call("Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True},
                                 browser=True)["sessionId"]  # fmt: skip
        self.call("Runtime.enable")
        self.call("Page.enable")

    def call(self, method: str, params: dict[str, Any] | None = None, browser: bool = False,
             timeout_s: float = 60.0) -> dict[str, Any]:  # fmt: skip
        """Send one command (to the page's session, or to the browser) and wait for its answer."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if not browser:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            got = self._read(deadline)
            if got.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description"))) for a in got["params"]["args"]))
            elif got.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(got["params"]["exceptionDetails"])[:500])
            if got.get("id") == self._next_id:
                if "error" in got:
                    raise BrowserError(f"{method}: {got['error']}")
                return dict(got["result"])

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed the pipe")
            self._buffer += chunk
        one, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(one))

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def js(self, expression: str, timeout_s: float = 60.0) -> Any:
        """The value of ``expression`` in the page (a promise is awaited); a script error raises BrowserError."""
        got = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                        timeout_s=timeout_s)  # fmt: skip
        if "exceptionDetails" in got:
            details = got["exceptionDetails"]
            raise BrowserError(f"{expression[:80]}: {details.get('exception', details)}")
        return got["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = self.js(expression)
            except BrowserError:  # the page is between documents
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"never true: {expression}; console: {self.console[-5:]}")
            time.sleep(0.1)

    def close(self) -> None:
        try:
            self.call("Browser.close", browser=True, timeout_s=10)
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
