"""The load on the machine while a benchmark measured: what else ran, and how much of the CPUs it took.

:class:`LoadRecord` reads the kernel's counters (Linux ``/proc``) when a measured block starts and when it ends,
and records the difference: the load average, how many CPUs were busy on average (all processes), the share of
time the hypervisor gave the CPUs to other machines (steal), the CPU this benchmark's own processes took and the
busiest other processes with their CPU share (of one CPU) and niceness. A record can span several blocks (the
rounds of one condition); the counters of each block are added up. Where ``/proc`` is missing the record holds the
load averages only.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from geomol.provenance import portable_arguments

__all__ = ["LoadRecord", "load_average"]

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
OTHERS_KEPT = 6
"""The number of other processes a record names (the busiest)."""


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages of the machine."""
    return [round(x, 2) for x in os.getloadavg()]


def _machine_ticks(proc: Path) -> tuple[int, int] | None:
    """(busy, steal) CPU ticks of all CPUs since boot from ``proc``/stat; None without it."""
    try:
        fields = [int(x) for x in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def _processes(proc: Path) -> dict[int, tuple[int, int, int, str]]:
    """{pid: (parent pid, CPU ticks so far, niceness, command name)} of every process of ``proc`` we may read."""
    table = {}
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        name, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[16]), name)
    return table


def _command(proc: Path, pid: int, name: str) -> str:
    """The process's command line (paths made portable, at most 100 characters), else its name."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return name
    argv = [a for a in argv if a]
    if not argv:
        return name
    line = " ".join([Path(argv[0]).name, *portable_arguments(argv[1:])])
    return line if len(line) <= 100 else line[:97] + "..."


def _descendants(table: dict, root: int) -> set[int]:
    """``root`` and every process below it in ``table``."""
    family, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, *_) in table.items():
            if parent in family and pid not in family:
                family.add(pid)
                grew = True
    return family


class LoadRecord:
    """``with record: ...`` (any number of times) then ``record.summary()``; see the module notes. ``proc``: where
    the kernel's process table is (another folder laid out alike in tests)."""

    def __init__(self, proc: str | os.PathLike = "/proc"):
        self.proc = Path(proc)
        self.seconds, self.busy, self.steal, self.own = 0.0, 0, 0, 0
        self.others: dict[int, list] = {}  # pid: [ticks, niceness, command]
        self.load_before: list[float] | None = None
        self.load_after: list[float] | None = None

    def __enter__(self) -> LoadRecord:
        if self.load_before is None:
            self.load_before = load_average()
        self._start = (time.perf_counter(), _machine_ticks(self.proc), _processes(self.proc))
        return self

    def __exit__(self, *exc) -> None:
        start, machine, processes = self._start
        end_machine, end_processes = _machine_ticks(self.proc), _processes(self.proc)
        self.seconds += time.perf_counter() - start
        self.load_after = load_average()
        if machine is not None and end_machine is not None:
            self.busy += end_machine[0] - machine[0]
            self.steal += end_machine[1] - machine[1]
        family = _descendants(end_processes, os.getpid())
        for pid, (_, ticks, nice, name) in end_processes.items():
            used = ticks - processes[pid][1] if pid in processes else ticks
            if pid in family:
                self.own += used
            elif used > 0:
                slot = self.others.setdefault(pid, [0, nice, None])
                slot[0] += used
                slot[2] = slot[2] or _command(self.proc, pid, name)

    def summary(self) -> dict:
        """{"seconds", "load_average_before", "load_average_after", "busy_cpus" (mean CPUs busy, every process),
        "steal_percent" (of all CPUs' time), "own_cpus" (this process and its children), "others_cpus" (every other
        process), "others": the busiest ones [{"command", "nice", "cpu_share"}]}."""
        seconds = max(self.seconds, 1e-9)
        cpus = lambda ticks: round(ticks / TICKS / seconds, 2)  # noqa: E731 (mean CPUs over the record)
        busiest = sorted(self.others.values(), key=lambda slot: -slot[0])[:OTHERS_KEPT]
        return {"seconds": round(self.seconds, 1), "load_average_before": self.load_before,
                "load_average_after": self.load_after, "busy_cpus": cpus(self.busy),
                "steal_percent": round(100 * self.steal / (TICKS * seconds * (os.cpu_count() or 1)), 1),
                "own_cpus": cpus(self.own), "others_cpus": cpus(sum(slot[0] for slot in self.others.values())),
                "others": [{"command": command, "nice": nice, "cpu_share": cpus(ticks)}
                           for ticks, nice, command in busiest]}
