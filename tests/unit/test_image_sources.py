"""Extra modules' sources gathered for a build (image/sources.py): a URL checked against
its sha256 (served by a real HTTP server on loopback), a local file or folder."""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import tarfile
import threading

import pytest

from flharness.image.debian import BuildError
from flharness.image.sources import _copy_in, _ensure_kbuild, _from_url

MODULE_C = b"/* a module */\n"


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving TMP/www; yields its base URL."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join(timeout=5)


def tarball(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_tarball_from_a_url_is_checked_and_unpacked(server, tmp_path):
    www, base = server
    data = tarball({"prague-1.0/tcp_prague.c": MODULE_C, "prague-1.0/Makefile": b"obj-m := tcp_prague.o\n"})
    (www / "prague.tar.gz").write_bytes(data)
    dest = tmp_path / "dest"
    dest.mkdir()
    folder = _from_url(dest, f"{base}/prague.tar.gz", hashlib.sha256(data).hexdigest(), None, tmp_path / "dl")
    assert folder.name == "prague-1.0" and (folder / "tcp_prague.c").read_bytes() == MODULE_C
    assert (tmp_path / "dl" / hashlib.sha256(data).hexdigest()).read_bytes() == data  # fetched once


def test_a_url_whose_content_does_not_match_its_checksum_is_refused(server, tmp_path):
    www, base = server
    (www / "sch_x.c").write_bytes(MODULE_C)
    with pytest.raises(BuildError, match="sha256 is"):
        _from_url(tmp_path, f"{base}/sch_x.c", "ab" * 32, None, tmp_path / "dl")
    assert not list((tmp_path / "dl").iterdir())  # nothing kept


def test_a_single_c_file_gets_a_kbuild_and_a_tarball_cannot_escape(server, tmp_path):
    www, base = server
    (www / "sch_x.c").write_bytes(MODULE_C)
    dest = tmp_path / "one"
    dest.mkdir()
    folder = _from_url(dest, f"{base}/sch_x.c", hashlib.sha256(MODULE_C).hexdigest(), None, tmp_path / "dl")
    _ensure_kbuild(folder, "sch_x")
    assert (folder / "Kbuild").read_text() == "obj-m := sch_x.o\n"
    evil = tarball({"../../escaped.c": MODULE_C})
    (www / "evil.tar.gz").write_bytes(evil)
    with pytest.raises(BuildError, match="not a plain file or folder inside it"):
        _from_url(tmp_path / "two", f"{base}/evil.tar.gz", hashlib.sha256(evil).hexdigest(), None, tmp_path / "dl")
    assert not (tmp_path.parent / "escaped.c").exists()


def test_a_local_folder_is_copied_without_build_products(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "tcp_prague.c").write_bytes(MODULE_C)
    (src / "tcp_prague.ko").write_bytes(b"old build")
    dest = tmp_path / "dest"
    dest.mkdir()
    _copy_in(src, dest, "src")
    assert sorted(p.name for p in dest.iterdir()) == ["tcp_prague.c"]
    with pytest.raises(BuildError, match="no such file"):
        _copy_in(tmp_path / "missing", dest, "missing")
    with pytest.raises(BuildError, match="no Kbuild or Makefile"):
        _ensure_kbuild(dest, "other_name")
