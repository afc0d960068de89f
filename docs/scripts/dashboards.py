"""Screenshots of the TensorBoard dashboards of two real runs of the example, for the docs.

Trains ``examples/gan_ring.py`` twice (seeds 0 and 1) into a temporary log directory, starts
TensorBoard on localhost, and takes headless-Chromium screenshots of the Scalars, Custom
Scalars, HParams, Images and PR Curves dashboards into ``docs/img/tb_*.png`` (palette PNGs, each well
under 300 KB). Needs ``chromium`` on the PATH (Debian: ``apt-get install chromium``; or set
``CHROMIUM=/path/to/chrome``) and ``tensorboard`` (a dependency of the package).

Run from the repository root::

    python docs/scripts/dashboards.py                 # two runs of 12 epochs in a temporary folder
    python docs/scripts/dashboards.py --logdir runs   # train into ./runs and keep them; if ./runs
                                                      # already holds runs, only take the screenshots
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[2]

#: Dashboard settings TensorBoard keeps in the browser's localStorage (not in the URL): show the
#: whole y range of every chart instead of hiding "outliers" (here, the best epochs).
LOCAL_SETTINGS = '<script>localStorage.setItem("_ignoreYOutliers", "false");</script>'

#: (file name, TensorBoard URL fragment): what each screenshot shows.
VIEWS = (
    # the scores beside the losses: one x axis, Lightning's step
    (
        "tb_scalars",
        "scalars&tagFilter=%5E(loss%2F.*%7Cprd%2F(precision%7Crecall%7Cdensity%7Ccoverage))%24&_smoothingWeight=0",
    ),
    ("tb_custom_scalars", "custom_scalars"),
    ("tb_hparams", "hparams"),  # the fingerprint and the scores, one row per run
    ("tb_images", "images&tagFilter=trajectory%7Cprd_curve"),
    ("tb_pr_curves", "pr_curves"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(logdir: Path, epochs: int, seeds: List[int]) -> None:
    """Two runs of the example; named runs when the example takes ``--name``."""
    example = ROOT / "examples" / "gan_ring.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    helptext = subprocess.run([sys.executable, str(example), "--help"], capture_output=True, text=True, env=env).stdout
    for seed in seeds:
        cmd = [sys.executable, str(example), "--epochs", str(epochs), "--seed", str(seed), "--logdir", str(logdir)]
        if "--name" in helptext:
            cmd += ["--name", f"gan_ring/seed{seed}_epochs{epochs}"]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def wait_for_tensorboard(url: str, timeout: float = 120.0) -> None:
    """Until TensorBoard serves the ``prd/`` scalar tags of every run."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/data/plugin/scalars/tags", timeout=5) as r:
                tags = json.load(r)
            if tags and all(any(t.startswith("prd/") for t in run) for run in tags.values()):
                return
        except OSError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"TensorBoard at {url} did not serve prd/ scalars within {timeout:.0f} s")


def settings_proxy(target: str) -> ThreadingHTTPServer:
    """A localhost proxy in front of TensorBoard that writes ``LOCAL_SETTINGS`` into its page.

    localStorage belongs to the origin, so the settings must be set by a page of the origin the
    screenshots load; the proxy is that origin.
    """

    class Handler(BaseHTTPRequestHandler):
        def forward(self, data: Optional[bytes]) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "x-xsrf-protected")}
            request = urllib.request.Request(target + self.path, data=data, headers=headers, method=self.command)
            try:
                with urllib.request.urlopen(request, timeout=60) as r:
                    status, ctype, body = r.status, r.headers.get("Content-Type", ""), r.read()
            except urllib.error.HTTPError as e:
                status, ctype, body = e.code, e.headers.get("Content-Type", ""), e.read()
            if ctype.startswith("text/html") and b"<head>" in body:
                body = body.replace(b"<head>", b"<head>" + LOCAL_SETTINGS.encode(), 1)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's names)
            self.forward(None)

        def do_POST(self) -> None:  # noqa: N802
            self.forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def screenshot(chromium: str, url: str, out: Path, size: str) -> None:
    """Headless Chromium screenshot of ``url`` once its scripts have run, as a palette PNG."""
    from PIL import Image

    raw = out.with_suffix(".raw.png")
    cmd = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={size}",
        "--virtual-time-budget=20000",
        f"--screenshot={raw}",
        url,
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    Image.open(raw).convert("RGB").quantize(colors=128).save(out, optimize=True)
    raw.unlink()
    print(f"wrote {out} ({out.stat().st_size // 1024} KB)")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12, help="epochs per run (default 12)")
    parser.add_argument(
        "--logdir", help="folder of the runs: reused when it holds event files, else trained into and kept"
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"), help="folder of the PNGs (default docs/img)")
    parser.add_argument("--size", default="1280,860", help="browser window W,H (default 1280,860)")
    args = parser.parse_args(argv)

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found: apt-get install chromium, or set CHROMIUM=/path/to/chrome")
    tmp = None
    if args.logdir:
        logdir = Path(args.logdir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="lightning_prd_dashboards_")
        logdir = Path(tmp.name)
    if not any(logdir.rglob("events.out.tfevents.*")):
        train(logdir, args.epochs, seeds=[0, 1])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    board = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_tensorboard(url)
        proxy = settings_proxy(url)
        shown = f"http://127.0.0.1:{proxy.server_address[1]}"
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        try:
            for name, fragment in VIEWS:
                screenshot(chromium, f"{shown}/?darkMode=false#{fragment}", out / f"{name}.png", args.size)
        finally:
            proxy.shutdown()
    finally:
        board.terminate()
        board.wait(timeout=30)
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
