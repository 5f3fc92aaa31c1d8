"""Whether anything of a command's process group still runs, read from a /proc of files."""

from __future__ import annotations

from pathlib import Path

from cronlog.worker.command_process import live_members


def proc_with(tmp_path: Path, stats: dict[int, str]) -> str:
    for pid, stat in stats.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat)
    (tmp_path / "self").mkdir()  # not a process number: skipped
    return str(tmp_path)


def test_a_running_member_counts(tmp_path: Path) -> None:
    proc = proc_with(tmp_path, {10: "10 (sh) S 1 10 10 0", 11: "11 (sleep) S 10 10 10 0",
                                20: "20 (other) R 1 20 20 0"})
    assert live_members(10, proc) is True
    assert live_members(30, proc) is False


def test_zombies_do_not_count_and_names_with_parentheses_are_read(tmp_path: Path) -> None:
    proc = proc_with(tmp_path, {11: "11 (sleep) Z 1 10 10 0",
                                12: "12 (a) b (c) Z 1 10 10 0",
                                13: "13 (x) S 1 99 99 0"})
    assert live_members(10, proc) is False
    assert live_members(99, proc) is True


def test_without_a_proc_it_cannot_tell(tmp_path: Path) -> None:
    assert live_members(10, str(tmp_path / "missing")) is None


def test_a_member_with_sigkill_pending_does_not_count(tmp_path: Path) -> None:
    # It exits the next time it runs; on a starved machine that can be seconds away.
    proc = proc_with(tmp_path, {11: "11 (sleep) R 1 10 10 0", 12: "12 (sh) S 1 20 20 0"})
    (tmp_path / "11" / "status").write_text("Name:\tsleep\nSigPnd:\t0000000000000000\n"
                                            "ShdPnd:\t0000000000000100\n")
    (tmp_path / "12" / "status").write_text("Name:\tsh\nSigPnd:\t0000000000000002\n"
                                            "ShdPnd:\t0000000000000000\n")
    assert live_members(10, proc) is False
    assert live_members(20, proc) is True, "a pending SIGINT leaves it running"
