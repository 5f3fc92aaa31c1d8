"""install_once: one install among launchers asking at once, and never a half-finished one
taken for finished (issue 32: a cluster's three nodes each ran Maven into one folder)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cronlog_dev.stack.install_once import COMPLETE, cache_root, exclusive, install_once
from cronlog_dev.stack.process import StackError


def one_jar(folder: Path) -> None:
    (folder / "a.jar").write_text("jar")


def test_launchers_asking_at_once_install_once_and_all_see_it_finished(tmp_path: Path) -> None:
    target = tmp_path / "libs"
    calls: list[Path] = []
    seen: list[bool] = []

    def install(folder: Path) -> None:
        calls.append(folder)
        time.sleep(0.3)  # long enough for every other launcher to arrive and wait
        (folder / "a.jar").write_text("jar")

    def launcher() -> None:
        got = install_once(target, install, "jars")
        seen.append((got / "a.jar").is_file() and (got / COMPLETE).is_file())

    threads = [threading.Thread(target=launcher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert seen == [True] * 4
    assert calls[0] != target  # built aside, renamed into place


def test_a_failed_install_leaves_nothing_and_the_next_launcher_installs_again(
        tmp_path: Path) -> None:
    target = tmp_path / "libs"

    def broken(folder: Path) -> None:
        (folder / "half.jar").write_text("half")
        raise StackError("the download failed")

    with pytest.raises(StackError, match="the download failed"):
        install_once(target, broken, "jars")
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []

    install_once(target, one_jar, "jars")
    assert sorted(p.name for p in target.iterdir()) == [COMPLETE, "a.jar"]


def test_a_folder_without_the_marker_is_installed_again(tmp_path: Path) -> None:
    target = tmp_path / "libs"
    target.mkdir()
    (target / "half.jar").write_text("left by a crashed launcher")
    stale = tmp_path / ".libs.partial-deadbeef"
    stale.mkdir()

    install_once(target, one_jar, "jars")
    assert sorted(p.name for p in target.iterdir()) == [COMPLETE, "a.jar"]
    assert not stale.exists()


def test_a_finished_install_is_not_repeated(tmp_path: Path) -> None:
    target = tmp_path / "libs"
    install_once(target, one_jar, "jars")

    def must_not_run(folder: Path) -> None:
        raise AssertionError("installed twice")

    install_once(target, must_not_run, "jars")


def test_a_lock_held_too_long_is_reported_with_its_file(tmp_path: Path) -> None:
    lock = tmp_path / ".libs.lock"
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with exclusive(lock, "jars"):
            held.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(5)
        with pytest.raises(StackError, match=r"another launcher's jars.*\.libs\.lock"), \
                exclusive(lock, "jars", wait_s=0.3):
            pass
    finally:
        release.set()
        t.join()


def test_the_cache_is_the_checkouts_own_unless_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONLOG_CACHE_DIR", raising=False)
    checkout = Path(__file__).resolve().parents[3]
    assert cache_root() == checkout / ".cronlog" / "cache"
    monkeypatch.setenv("CRONLOG_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
