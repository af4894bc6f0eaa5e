"""fl's logging (flharness/log.py): what the terminal shows at each level, and the run
folder's debug.log, kept in memory until the folder exists."""
from __future__ import annotations

import logging

from flharness import log


def test_the_console_shows_info_plainly_warnings_prefixed_and_debug_only_when_verbose(capsys):
    logger = logging.getLogger("flharness.test")
    log.setup(verbose=False)
    logger.debug("hidden")
    logger.info("a status line")
    logger.warning("careful")
    out, err = capsys.readouterr()
    assert out == "a status line\n" and err == "fl: warning: careful\n"
    log.setup(verbose=True)
    logger.debug("shown")
    out, _ = capsys.readouterr()
    assert out.endswith(" flharness.test: shown\n") and out[2] == ":"  # HH:MM:SS name: message


def test_the_debug_log_keeps_what_came_before_its_folder_existed(tmp_path, capsys):
    logger = logging.getLogger("flharness.test")
    log.setup(verbose=False)
    with log.debug_log() as debug:
        logger.debug("before the folder")
        path = debug.write_to(tmp_path / "run")
        logger.info("after it")
    logger.debug("after the block")
    lines = path.read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == ["DEBUG   flharness.test: before the folder",
                                                         "INFO    flharness.test: after it"]
    with log.debug_log():
        logger.debug("never written")
    assert not (tmp_path / "other").exists()
