"""Render a fedroc HTML report in headless Chromium and fail on a broken page.

The report is copied with a small probe script appended; Chromium loads it offline (every
host name resolves to nothing, so a resource fetched from the network would fail to load)
and prints the DOM after the probe ran. The check fails unless every image decoded, every
expected section is in the DOM, and the page asked for no external resource.

Usage::

    python scripts/check_report_browser.py REPORT.html [--section result ...]

Chromium comes from Debian's packages (``apt-get install chromium``); the test
``tests/test_report.py`` runs this check and skips when Chromium is absent.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

PROBE = """<script>
(function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var ext = Array.prototype.slice.call(document.querySelectorAll('[src],[href]'))
    .map(function (e) { return e.getAttribute('src') || e.getAttribute('href'); })
    .filter(function (u) { return /^(https?:)?\\/\\//i.test(u); });
  var out = document.createElement('pre');
  out.id = 'fedroc-probe';
  out.textContent = 'images=' + imgs.length + ' broken=' + broken.length +
    ' external=' + ext.length + ' width=' + document.documentElement.scrollWidth;
  document.body.appendChild(out);
})();
</script>"""

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def render(report: Path, chromium: str, timeout: float = 60.0) -> str:
    """The DOM of ``report`` (with the probe) after Chromium rendered it offline."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        text = report.read_text(encoding="utf-8")
        page.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",  # root in containers; the page is our own file
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={tmp}/profile",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-500:]}")
        return proc.stdout


def check(report: Path, sections: Sequence[str], chromium: str) -> list[str]:
    """Problems found in the rendered report (empty when the page is fine)."""
    dom = render(report, chromium)
    problems = []
    probe = re.search(r'<pre id="fedroc-probe">([^<]*)</pre>', dom)
    if probe is None:
        return ["the probe did not run: the page did not load or its DOM is broken"]
    values = dict(kv.split("=") for kv in probe.group(1).split())
    if int(values["broken"]):
        problems.append(f"{values['broken']} of {values['images']} image(s) did not decode")
    if int(values["external"]):
        problems.append(f"{values['external']} reference(s) to external resources")
    for ident in sections:
        if f'id="{ident}"' not in dom:
            problems.append(f"section {ident!r} missing from the rendered DOM")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--section", action="append", default=[])
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        print("chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    problems = check(args.report, args.section, chromium)
    for p in problems:
        print(f"broken: {p}", file=sys.stderr)
    if not problems:
        print(f"{args.report}: rendered fine in {chromium}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
