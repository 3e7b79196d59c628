"""Where a finding is: 1-based lines and columns (code points), a range's end column
exclusive."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class Position:
    line: int
    column: int


@dataclass(frozen=True, order=True)
class Range:
    start: Position
    end: Position

    @classmethod
    def of(cls, line: int, column: int, end_line: int, end_column: int) -> Range:
        return cls(Position(line, column), Position(end_line, end_column))


@dataclass(frozen=True)
class Location:
    path: Path
    range: Range
