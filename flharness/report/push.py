"""`fl push`: copy a run folder (with its index) to a web server's directory with rsync,
then fetch the pushed index over HTTP and check every link and image in it.

Destination, URL and the ssh command come from the command line or the inventory
(fl_push_dest, fl_push_url, fl_push_rsh); nothing secret is stored: ssh uses the
user's own keys and configuration.
"""
from __future__ import annotations

import logging
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

from ..errors import FlError
from ..results import run_folder

LOG = logging.getLogger(__name__)
DEST_RE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9._-]+:[A-Za-z0-9._/+-]*\Z|^/[A-Za-z0-9._/+-]*\Z")


def push(run_dir: Path, dest: str, url: str | None, rsh: str = "ssh -o BatchMode=yes") -> int:
    if not (run_dir / run_folder.INDEX_HTML).is_file():
        raise FlError(f"{run_dir}: no index.html; run `fl plot` first")
    if not DEST_RE.match(dest) or ".." in dest.split("/"):
        raise FlError(f"--dest {dest!r}: a local absolute path or [user@]host:path (letters, digits, . _ / + -)")
    if url is not None:
        check_url(url)
    target = f"{dest.rstrip('/')}/{run_dir.name}/"
    if ":" not in dest:
        Path(target).mkdir(parents=True, exist_ok=True)
    argv = ["rsync", "-a", "--delete", "--exclude", ".*", f"{run_dir}/", target]
    if ":" in dest:
        argv[1:1] = ["-e", rsh]  # rsync runs it without a shell
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise FlError(f"rsync to {target} failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
    LOG.info("pushed %s to %s", run_dir, target)
    if url is None:
        LOG.info("no --url (or fl_push_url): links not verified")
        return 0
    index = urllib.parse.urljoin(url.rstrip("/") + "/", f"{run_dir.name}/index.html")
    broken = check_links(index)
    for link, why in broken:
        LOG.info("broken: %s (%s)", link, why)
    LOG.info("%s: %s", index, "all links ok" if not broken else f"{len(broken)} broken link(s)")
    return 1 if broken else 0


def check_url(url: str) -> None:
    """An http(s) URL with a host, without spaces or control characters."""
    try:
        parts = urllib.parse.urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a bad port or bracketed host
        ok = False
    if not ok or len(url) > 2000 or any(c.isspace() or not c.isprintable() for c in url):
        raise FlError(f"--url {url[:100]!r}: an http:// or https:// URL with a host")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (tag, name) in (("a", "href"), ("img", "src"), ("link", "href")):
                self.links.append(value)


def check_links(index_url: str) -> list[tuple[str, str]]:
    """[(url, problem)] for the index itself or any link or image in it that fails."""
    try:
        html = _get(index_url).decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as e:
        return [(index_url, str(e))]
    parser = _Links()
    parser.feed(html)
    broken = []
    for link in dict.fromkeys(parser.links):
        if link.startswith(("#", "mailto:")):
            continue
        target = urllib.parse.urljoin(index_url, link)
        try:
            _get(target, head=True)
        except (urllib.error.URLError, OSError) as e:
            broken.append((target, str(e)))
    return broken


def _get(url: str, head: bool = False) -> bytes:
    req = urllib.request.Request(url, method="HEAD" if head else "GET")
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.status != 200:
            raise urllib.error.URLError(f"HTTP {r.status}")
        body: bytes = r.read()
        return body
