"""The web side of the report tests: a real nginx serving a pushed folder on loopback,
and headless Chromium rendering a page from it (tables, images that load, a screenshot)."""
from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from flrun import listening, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(tmp_path: Path, www: Path) -> tuple[subprocess.Popen, str]:
    """A real nginx on a free loopback port serving WWW (its own config in TMP_PATH)."""
    port = _free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log; daemon off;
events {{}}
http {{ include /etc/nginx/mime.types; access_log {tmp_path}/access.log;
  client_body_temp_path {tmp_path}; proxy_temp_path {tmp_path}; fastcgi_temp_path {tmp_path};
  uwsgi_temp_path {tmp_path}; scgi_temp_path {tmp_path};
  server {{ listen 127.0.0.1:{port}; root {www}; }} }}
""")
    proc = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(conf), "-p", str(tmp_path)])

    try:
        wait_for(lambda: listening("127.0.0.1", port), f"nginx listens on port {port}", timeout=10)
    except AssertionError:
        stop_nginx(proc)
        raise
    return proc, f"http://127.0.0.1:{port}/"


def stop_nginx(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGQUIT)  # graceful stop of this nginx, by its PID
    proc.wait(timeout=10)


@pytest.fixture
def nginx(tmp_path):
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("needs nginx (./install.sh)")
    # nginx's workers drop root: serve from a world-readable folder outside pytest's 0700 tree
    www = Path(tempfile.mkdtemp(prefix="fl-www-"))
    www.chmod(0o755)
    proc, url = start_nginx(tmp_path, www)
    yield www, url
    stop_nginx(proc)
    shutil.rmtree(www)


#: A page that loads PAGE in a 1280 px frame, then reports its tables, its images (those
#: that did not load) and what overlaps: a figure over a link or over another figure, a
#: table wider than the page with no scrollbar (the boxes the browser laid out).
PROBE = """<!DOCTYPE html><html><body style="margin:0"><pre id="out">waiting</pre>
<iframe id="f" src="%s" width="1280" height="900"></iframe>
<script>
document.getElementById('f').onload = function () {
  // thumbnails load lazily, as a reader scrolls: load them all before judging them
  Array.prototype.forEach.call(document.getElementById('f').contentDocument.querySelectorAll('img'),
                               function (i) { i.loading = 'eager'; });
  setTimeout(function () {
    var d = document.getElementById('f').contentDocument, w = d.defaultView, imgs = d.querySelectorAll('img');
    var all = function (sel) { return Array.prototype.slice.call(d.querySelectorAll(sel)); };
    var box = function (e) { return e.getBoundingClientRect(); };
    var hit = function (a, b) { return a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1; };
    var name = function (i) { return i.getAttribute('src'); };
    var scrolls = function (e) {
      for (; e && e !== d.body; e = e.parentElement) {
        var o = w.getComputedStyle(e).overflowX;
        if ((o === 'auto' || o === 'scroll') && e.scrollWidth > e.clientWidth) { return true; }
      }
      return false;
    };
    var bad = all('img').filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
    var links = all('a').filter(function (a) { return !a.querySelector('img'); });
    var problems = [], pics = all('img'), width = d.documentElement.clientWidth;
    pics.forEach(function (i, n) {
      links.forEach(function (a) { if (hit(box(i), box(a))) { problems.push('figure ' + name(i) + ' over link ' + a.textContent); } });
      pics.slice(n + 1).forEach(function (j) { if (hit(box(i), box(j))) { problems.push('figure ' + name(i) + ' over figure ' + name(j)); } });
    });
    all('table').forEach(function (t, n) {
      var r = box(t).right;
      if ((r > width + 1 || t.scrollWidth > t.clientWidth + 1) && !scrolls(t)) {
        var px = Math.round(Math.max(r, t.scrollWidth));
        problems.push('table ' + (n + 1) + ' wider than the page (' + px + ' px of ' + width + ') without a scrollbar');
      }
    });
    document.getElementById('out').textContent = JSON.stringify(
      {tables: d.querySelectorAll('table').length, images: imgs.length, broken: bad.map(function (i) { return i.src; }),
       overlaps: problems});
  }, 2000);
};
</script></body></html>"""




def render_in_chromium(www: Path, url: str, page: str, tmp_path: Path) -> dict:
    """PAGE (relative to URL, served from WWW) rendered by headless Chromium 1280 px wide: its
    tables, images, the images that did not load and what overlaps (PROBE); a screenshot
    is kept in TMP_PATH."""
    if CHROMIUM is None:
        pytest.skip("needs chromium (./install.sh)")
    (www / "probe.html").write_text(PROBE % page)
    chrome = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "chrome")]
    dom = subprocess.run(chrome + ["--virtual-time-budget=10000", "--dump-dom", url + "probe.html"],
                         capture_output=True, text=True, timeout=120).stdout
    result = json.loads(dom.split('<pre id="out">')[1].split("</pre>")[0])
    shot = tmp_path / (Path(page).parent.name + ".png")
    subprocess.run(chrome + ["--window-size=1280,3000", f"--screenshot={shot}", url + page],
                   capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    return result
