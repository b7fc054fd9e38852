"""Headless Chromium (Debian's package) driven over the DevTools protocol on a websocket: no
WebDriver, no browser download. Enough of it to open a page, type, click where a user clicks,
wait for the page to show something, and take screenshots."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class PageError(AssertionError):
    pass


class Browser:
    def __init__(self, folder: Path, size: tuple[int, int] = (1280, 900)):
        exe = chromium()
        if exe is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium; ./dev test does it)")
        self.folder, self.size = folder, size
        profile = folder / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a stale one names a port of a browser gone
        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={size[0]},{size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(folder / "chromium.log", "ab"))
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"chromium did not start: {(folder / 'chromium.log').read_text()[-2000:]}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self.console: list[str] = []

    async def __aenter__(self) -> Browser:
        try:
            return await self._connect()
        except BaseException:
            self._stop()
            raise

    async def _connect(self) -> Browser:
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as r:
            pages = [t for t in await r.json() if t["type"] == "page"]
        self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime"):
            await self.send(f"{domain}.enable")
        await self.send("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                        deviceScaleFactor=1, mobile=False)
        return self

    async def __aexit__(self, *exc) -> None:
        self._reader.cancel()
        await self.ws.close()
        await self.session.close()
        self._stop()

    def _stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._waiting:
                self._waiting.pop(data["id"]).set_result(data)
            elif data.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in
                                             data["params"]["args"]))
            elif data.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(data["params"]["exceptionDetails"])[:500])

    async def send(self, method: str, **params) -> dict:
        i = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[i] = fut
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise PageError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def eval(self, js: str):
        r = await self.send("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise PageError(f"{js[:80]}: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete'", 30)

    async def wait_for(self, js: str, timeout: float, what: str | None = None):
        """The first truthy value of `js`, polled."""
        deadline = time.monotonic() + timeout
        while True:
            v = await self.eval(js)
            if v:
                return v
            if time.monotonic() > deadline:
                raise PageError(f"timed out waiting for {what or js}; console: {self.console[-10:]}")
            await asyncio.sleep(0.25)

    async def box(self, selector: str) -> dict:
        r = await self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
                            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                            " return {x: r.left, y: r.top, w: r.width, h: r.height}; })()")
        if r is None:
            raise PageError(f"no element {selector}")
        return r

    async def click(self, selector: str, fx: float = 0.5, fy: float = 0.5) -> None:
        """A real mouse click at a point of the element (fx, fy: fractions of its box)."""
        b = await self.box(selector)
        x, y = b["x"] + b["w"] * fx, b["y"] + b["h"] * fy
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def type(self, selector: str, text: str) -> None:
        await self.click(selector)
        await self.eval(f"document.querySelector({json.dumps(selector)}).select()")
        await self.send("Input.insertText", text=text)

    async def screenshot(self, path: Path) -> Path:
        data = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
