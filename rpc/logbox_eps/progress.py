"""logbox-eps's progress line: once a second, on a terminal, where the step under way stands
(what was sent against what its rate asks by now, what the box has stored of it, the lag, the
searches). It redraws one line with a carriage return, and writes nothing at all when stderr is
not a terminal or --quiet is given, so that captured output stays clean."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO


@dataclass
class Current:
    """The step under way, as the ramp sets it (None members: not yet)."""

    k: int = 0
    rate: float = 0.0
    hold: float = 0.0
    start: float = 0.0  # when its load starts sending (time.time())
    load: Any = None  # load.Load: sent_now()
    sampler: Any = None  # measure.Sampler: samples
    searchers: Any = None  # searchers.Searchers: answered()
    phase: str = "sending"  # then "counting" while the store is asked

    def begin(self, k: int, rate: float, start: float, load: Any, sampler: Any,
              searchers: Any) -> None:  # fmt: skip
        """A new step: its number, rate and start, and what counts it."""
        self.k, self.rate, self.start, self.phase = k, rate, start, "sending"
        self.load, self.sampler, self.searchers = load, sampler, searchers


def line(c: Current, now: float) -> str:
    """The progress line of c at now."""
    el = min(max(0.0, now - c.start), c.hold)
    parts = [f"step {c.k + 1}", f"{c.rate:,.0f} EPS"]
    if c.phase != "sending":
        parts.append(c.phase)
    sent = c.load.sent_now() if c.load is not None else 0
    parts.append(f"sent {sent:,}/{int(c.rate * el):,}")
    samples = c.sampler.samples if c.sampler is not None else []
    first = next((x["stored"] for x in samples if x.get("stored") is not None), None)
    if first is not None and samples[-1].get("stored") is not None:
        parts.append(f"stored {samples[-1]['stored'] - first:,}")
        lag = samples[-1].get("spool_lag_s")
        if lag is not None:
            parts.append(f"lag {lag:.1f} s")
    if c.searchers is not None and el > 0:
        parts.append(f"{c.searchers.answered() / el:.1f} searches/s")
    parts.append(f"{el:.0f}/{c.hold:g} s")
    return " · ".join(parts)


class Progress:
    """A thread that redraws line(current) on out every interval seconds until stop()."""

    def __init__(self, out: TextIO, current: Current, interval: float = 1.0) -> None:
        self.out = out
        self.current = current
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._shown = False

    def start(self) -> Progress:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends the line (a newline, so that what follows starts on its own)."""
        self._stop.set()
        self._thread.join(5)
        if self._shown:
            self.out.write("\n")
            self.out.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            width = shutil.get_terminal_size((100, 20)).columns - 1
            text = line(self.current, time.time())[:width]
            self.out.write("\r" + text.ljust(width))
            self.out.flush()
            self._shown = True
