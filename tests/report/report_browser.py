#!/usr/bin/env python3
"""Opens recmix report pages in headless Chromium and prints what each did, as JSON lines.

For each page: the time from navigation to the page's own "rendered" mark (report.js sets
data-rendered on <html> after drawing every chart), console messages at warning or error level,
uncaught exceptions, every network request other than the page itself, and per chart figure its
data-drawn (points handed to Chart.js), canvas size, and the pixels its data paints (those that
change when its datasets are hidden). Optionally a full-page screenshot.
Talks to Chromium over --remote-debugging-pipe (the DevTools protocol), so no port is opened.

Usage: report_browser.py [--chromium PATH] [--screenshot-dir DIR] PAGE.html...
Exit status: 0 with one JSON line per page; 77 when Chromium cannot be started.
"""
import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium, profile):
        # fd 3: commands to Chromium, fd 4: its replies and events (NUL-terminated JSON).
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def wire():
            # Move both ends above 4 first: a pipe end may itself be fd 3 or 4.
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--mute-audio",
             "--user-data-dir=" + profile, "--window-size=1400,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False)  # dup2 leaves 3 and 4 inheritable; Python's own fds are not
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self.read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def read(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def open_page(browser, path, screenshot_dir):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Network", "Log"):
        browser.send(domain + ".enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=session)
    browser.events.clear()
    url = "file://" + os.path.abspath(path)
    start = time.monotonic()
    browser.send("Page.navigate", {"url": url}, session=session)
    state = None
    deadline = start + 60
    while time.monotonic() < deadline:
        state = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": """(() => {
            const r = document.documentElement.dataset;
            if (document.readyState !== 'complete' || r.rendered === undefined) return null;
            return {rendered: +r.rendered, errors: +(r.errors || 0), render_ms: +r.renderMs, draw_ms: +r.drawMs,
                    figures: [...document.querySelectorAll('figure.chart')].map(f => ({
                      id: f.id, title: f.querySelector('figcaption').textContent, points: +f.dataset.points,
                      drawn: f.dataset.drawn === undefined ? -1 : +f.dataset.drawn,
                      width: f.querySelector('canvas').width, height: f.querySelector('canvas').height}))};
        })()"""}, session=session)["result"].get("value")
        if state:
            break
        time.sleep(0.02)
    seconds = time.monotonic() - start
    if state is None:
        state = {"rendered": -1, "figures": []}
    problems, requests = [], []
    for e in browser.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            problems.append("console." + params["type"] + ": " +
                            " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            problems.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            problems.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            request_url = params.get("request", {}).get("url", "")
            if request_url != url:
                requests.append(request_url)
    # After the page's own messages are collected: reading pixels back makes Chromium log advice.
    pixels = browser.send("Runtime.evaluate", {"returnByValue": True, "expression": """
        [...document.querySelectorAll('figure.chart canvas')].map((c) => {
          // Pixels (every 4th) that change when the chart's datasets are hidden: the drawing of
          // the data itself, not the axes, grid and labels.
          const chart = Chart.getChart(c);
          if (!chart) return 0;
          const pixels = () => c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          const legend = chart.options.plugins.legend.display;
          chart.options.plugins.legend.display = false;  // hiding a dataset strikes its legend entry
          chart.update('none');
          const shown = pixels();
          chart.data.datasets.forEach((d, i) => chart.setDatasetVisibility(i, false));
          chart.update('none');
          const hidden = pixels();
          chart.data.datasets.forEach((d, i) => chart.setDatasetVisibility(i, true));
          chart.options.plugins.legend.display = legend;
          chart.update('none');
          let n = 0;
          for (let i = 0; i < shown.length; i += 16)
            if (shown[i] !== hidden[i] || shown[i + 1] !== hidden[i + 1] || shown[i + 2] !== hidden[i + 2] ||
                shown[i + 3] !== hidden[i + 3]) n++;
          return n;
        })"""}, session=session)["result"].get("value") or []
    for figure, n in zip(state["figures"], pixels):
        figure["data_pixels"] = n
    shot = None
    if screenshot_dir:
        height = browser.send("Runtime.evaluate", {"returnByValue": True,
                                                    "expression": "document.documentElement.scrollHeight"},
                              session=session)["result"]["value"]
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1400, "height": min(int(height), 16000), "deviceScaleFactor": 1, "mobile": False},
                     session=session)
        data = browser.send("Page.captureScreenshot", {"format": "png"}, session=session, timeout=60)["data"]
        shot = os.path.join(screenshot_dir, os.path.basename(path) + ".png")
        with open(shot, "wb") as f:
            f.write(base64.b64decode(data))
        # The same page in tiles of 1400 x 1000 pixels, for reading at full size.
        for k in range(0, min(int(height), 16000), 1000):
            clip = {"x": 0, "y": k, "width": 1400, "height": min(1000, int(height) - k), "scale": 1}
            data = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip}, session=session,
                                timeout=60)["data"]
            with open(os.path.join(screenshot_dir, f"{os.path.basename(path)}.{k // 1000:02d}.png"), "wb") as f:
                f.write(base64.b64decode(data))
    browser.send("Target.closeTarget", {"targetId": target})
    return {"page": path, "load_s": round(seconds, 3), "problems": problems, "requests": requests,
            "screenshot": shot, **state}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    parser.add_argument("--screenshot-dir")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    if not args.chromium:
        print("SKIP: no chromium on PATH (Debian package chromium)", file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory(prefix="recmix-chromium-") as profile:
        try:
            browser = Browser(args.chromium, profile)
            browser.send("Browser.getVersion", timeout=60)
        except Exception as e:  # noqa: BLE001 - any failure to start is a skip
            print(f"SKIP: chromium cannot be started: {e}", file=sys.stderr)
            return 77
        try:
            for page in args.pages:
                print(json.dumps(open_page(browser, page, args.screenshot_dir)), flush=True)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
