"""A screenshot of the view in headless Chromium, taken once it has drawn.

Debian's ``chromium`` renders the web viewer's WebGL through SwiftShader (no GPU needed); a
small DevTools-protocol client (``websockets``) loads the page, then takes screenshots until
two in a row are the same (the viewer has drawn and settled) and returns the last one. Used by
``r2s2r view BAG --screenshot PNG`` and the browser test. ROS-free.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.errors import BadInputError, RunFailedError
from r2s2r_common.files import write_atomic
from r2s2r_common.process import spawn_owned, stop_process_group

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
"""Browser executables looked for on PATH, in order."""
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--use-gl=angle",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--ignore-gpu-blocklist",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--hide-scrollbars",
)
"""Headless, with WebGL through SwiftShader (software) where there is no GPU."""


class BrowserMissingError(BadInputError):
    """No Chromium on PATH."""


class SnapshotError(RunFailedError):
    """The browser did not start, or the page did not settle in time."""


def find_chromium() -> str:
    """Return the Chromium executable on PATH.

    Raises:
        BrowserMissingError: None found (install Debian's ``chromium``).

    """
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserMissingError(
        "no Chromium on PATH for the screenshot: install it (apt-get install -y chromium)"
    )


def decode_png(data: bytes) -> np.ndarray:
    """Decode PNG bytes into an (H, W, 3) uint8 RGB array."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


SETTLED_CHANGED_FRACTION = 0.005
"""Two screenshots agree when fewer than this share of pixels differ (a clock may tick)."""


def settled(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether two screenshots show the same drawn page (not blank, nearly no pixel changed)."""
    if before.shape != after.shape or after.std() <= 1.0:
        return False
    changed = np.any(before != after, axis=-1)
    return float(changed.mean()) < SETTLED_CHANGED_FRACTION


class _DevTools:
    """The minimum of the DevTools protocol: call a method on one page, await its answer."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        call_id = self._next_id
        await self._socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(await self._socket.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise SnapshotError(f"DevTools {method}: {message['error']}")
                return dict(message.get("result", {}))


def _devtools_port(profile: Path, browser: subprocess.Popen[Any], timeout_s: float) -> int:
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if browser.poll() is not None:
            raise SnapshotError(f"chromium exited at start-up (code {browser.returncode})")
        if port_file.is_file():
            first = port_file.read_text().split()
            if first:
                return int(first[0])
        time.sleep(0.1)
    raise SnapshotError(f"chromium opened no DevTools port within {timeout_s:g} s")


async def _settled_screenshot(
    websocket_url: str,
    url: str,
    size_px: tuple[int, int],
    min_wait_s: float,
    timeout_s: float,
    settle_period_s: float,
) -> bytes:
    import websockets

    width, height = size_px
    async with websockets.connect(websocket_url, max_size=None) as socket:
        tools = _DevTools(socket)
        await tools.call("Page.enable")
        await tools.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await tools.call("Page.navigate", url=url)
        started = time.monotonic()
        await asyncio.sleep(min_wait_s)
        previous: np.ndarray | None = None
        while True:
            shot = await tools.call("Page.captureScreenshot", format="png")
            data = base64.b64decode(shot["data"])
            pixels = decode_png(data)
            if previous is not None and settled(previous, pixels):
                return data
            if time.monotonic() - started > timeout_s:
                if pixels.std() > 1.0:  # drawn, still changing (a plot scrolls): the last one
                    return data
                raise SnapshotError(f"{url}: the page drew nothing within {timeout_s:g} s")
            previous = pixels
            await asyncio.sleep(settle_period_s)


def screenshot(
    url: str,
    size_px: tuple[int, int] = (1600, 900),
    min_wait_s: float = 8.0,
    timeout_s: float = 120.0,
    settle_period_s: float = 3.0,
) -> bytes:
    """Load ``url`` in headless Chromium and return a PNG once two screenshots agree.

    A page that has drawn but keeps changing (a scrolling plot) gives its last screenshot at
    ``timeout_s``.

    Args:
        url: The page (the view's address).
        size_px: Viewport (width, height).
        min_wait_s: Wait before the first screenshot (the viewer's WebAssembly loads).
        timeout_s: Give up after this long.
        settle_period_s: Time between two compared screenshots.

    Raises:
        BrowserMissingError: No Chromium on PATH.
        SnapshotError: The browser did not start or the page drew nothing.

    """
    executable = find_chromium()
    profile = Path(tempfile.mkdtemp(prefix="r2s2r_view_chromium_"))
    width, height = size_px
    browser = spawn_owned(
        [
            executable,
            *CHROMIUM_FLAGS,
            f"--window-size={width},{height}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = _devtools_port(profile, browser, 30.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.loads(answer.read())
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise SnapshotError("chromium has no page to drive")
        return asyncio.run(
            _settled_screenshot(
                pages[0]["webSocketDebuggerUrl"],
                url,
                size_px,
                min_wait_s,
                timeout_s,
                settle_period_s,
            )
        )
    finally:
        stop_process_group(browser, grace_s=5.0)
        shutil.rmtree(profile, ignore_errors=True)


def write_png_atomic(data: bytes, path: Path) -> None:
    """Write PNG bytes to ``path``, creating its folder, whole or not at all (``write_atomic``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
