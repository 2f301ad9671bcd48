"""What every benchmark shares: interleaved runs, figures with their targets, the table.

The machine is shared (another job may be using the CPUs), so no figure is an absolute
time measured alone: each compares variants measured side by side in the same run, their
order rotated from run to run, and reports the median over runs with the spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A bound the median must meet: `op` is '<', '≤', '>' or '≥'."""

    op: str
    value: float

    def met_by(self, measured: float) -> bool:
        return {"<": measured < self.value, "≤": measured <= self.value, ">": measured > self.value,
                "≥": measured >= self.value}[self.op]


@dataclass
class Figure:
    name: str
    samples: list[float]
    unit: str = ""  # printed after the numbers: "ms", "s", "MB", "" for ratios
    target: Target | None = None  # None: shown for information, no verdict
    note: str = ""
    digits: int = 2

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "info"
        return "PASS" if self.target.met_by(self.median) else "FAIL"

    def measured(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        median = f"{self.median:.{self.digits}f}{unit}"
        if len(self.samples) == 1:
            return median
        low, high = min(self.samples), max(self.samples)
        return f"{median} ({low:.{self.digits}f}–{high:.{self.digits}f}, n={len(self.samples)})"

    def target_text(self) -> str:
        if self.target is None:
            return "—"
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.target.op} {self.target.value:g}{unit}"


@dataclass
class Section:
    """One benchmark's figures, or why it could not run."""

    name: str
    figures: list[Figure] = field(default_factory=list)
    error: str = ""


def interleaved(variants: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """Call each variant once per run, rotating the order every run so that none always goes
    first (caches, warm-up, a background job's phases); returns each variant's samples."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(variants[name]())
    return samples


def paired(a: list[float], b: list[float], combine: Callable[[float, float], float]) -> list[float]:
    """Per-run combinations of two variants measured in the same run (ratios, differences)."""
    return [combine(x, y) for x, y in zip(a, b, strict=True)]


def table(sections: list[Section]) -> str:
    rows = [("figure", "measured: median (min–max, runs)", "target", "result")]
    notes: list[str] = []
    for section in sections:
        if section.error:
            rows.append((f"{section.name}: not measured", section.error.splitlines()[0][:100], "", "ERROR"))
        for figure in section.figures:
            rows.append((figure.name, figure.measured(), figure.target_text(), figure.verdict))
            if figure.note:
                notes.append(f"- {figure.name}: {figure.note}")
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines + ([""] + notes if notes else []))
