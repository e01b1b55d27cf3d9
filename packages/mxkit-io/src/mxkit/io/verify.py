"""Checking record files and rebuilding their index (``mxkit rec verify`` / ``rec index``).

Both walk the file record by record; at a damaged record they note the offset and the
reason, then resynchronise on the next record head (an aligned magic word with cflag 0
or 1) and go on, so one bad region does not hide the rest of the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from mxkit.core.errors import ConfigError, FormatError
from mxkit.io._format import READ_BUFFER_BYTES, RecordReader, next_record_head
from mxkit.io._streams import exists, file_size, index_lines, open_binary, open_text
from mxkit.io.recordio import unpack

__all__ = ["RecordProblem", "VerifyReport", "rebuild_index", "scan_records", "verify_record_file"]


@dataclass(frozen=True)
class RecordProblem:
    """A damaged region: where it starts and what is wrong there."""

    offset: int
    reason: str


@dataclass
class VerifyReport:
    """What ``verify_record_file`` found."""

    path: str
    size: int
    records: int = 0
    problems: list[RecordProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def scan_records(uri: str | os.PathLike[str], problems: list[RecordProblem]) -> Iterator[tuple[int, bytes]]:
    """``(offset, payload)`` of every intact record; damaged regions go to ``problems``."""
    text = os.fspath(uri)
    with open_binary(text, "rb", READ_BUFFER_BYTES) as handle, open_binary(text, "rb") as search_handle:
        reader = RecordReader(handle, text)
        while True:
            start = reader.tell()
            try:
                payload = reader.read()
            except FormatError as error:
                problems.append(RecordProblem(getattr(error, "offset", start), getattr(error, "reason", str(error))))
                head = next_record_head(search_handle, start + 4)
                if head is None:
                    return
                reader.seek(head)
                continue
            if payload is None:
                return
            yield start, payload


def verify_record_file(uri: str | os.PathLike[str], idx_path: str | os.PathLike[str] | None = None) -> VerifyReport:
    """Read every record of ``uri`` and report damaged ones by offset.

    When ``idx_path`` is given (or ``uri`` with ``.idx`` for ``.rec`` exists), every index
    entry must point at the head of an intact record.
    """
    text = os.fspath(uri)
    report = VerifyReport(text, file_size(text))
    heads = set()
    for offset, _ in scan_records(text, report.problems):
        heads.add(offset)
        report.records += 1
    if idx_path is None and text.endswith(".rec") and exists(text[:-4] + ".idx"):
        idx_path = text[:-4] + ".idx"
    if idx_path is not None:
        try:
            lines = list(index_lines(idx_path))
        except FormatError as error:
            report.problems.append(RecordProblem(-1, str(error)))
            lines = []
        for line_number, line in lines:
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            try:
                offset = int(fields[1])
            except (IndexError, ValueError):
                reason = f"index line {line_number} is malformed: {line.rstrip()!r}"
                report.problems.append(RecordProblem(-1, reason))
                continue
            if offset not in heads:
                where = "past the end of the file" if offset >= report.size else "not at an intact record head"
                reason = f"index line {line_number} (key {fields[0]}) points at byte {offset}, {where}"
                report.problems.append(RecordProblem(offset, reason))
    return report


def rebuild_index(
    uri: str | os.PathLike[str], idx_path: str | os.PathLike[str] | None = None, key: str = "id"
) -> tuple[int, list[RecordProblem]]:
    """Write a fresh ``.idx`` for ``uri``; return the entries written and the damage skipped.

    ``key="id"`` takes each record's key from its IRHeader ``id`` (what im2rec and
    ``write_idx`` with image indices produce); ``key="position"`` numbers records 0, 1, ...
    """
    if key not in ("id", "position"):
        raise ConfigError(f"index key must be 'id' (IRHeader id) or 'position', got {key!r}")
    text = os.fspath(uri)
    if idx_path is None:
        idx_path = (text[:-4] if text.endswith(".rec") else text) + ".idx"
    problems: list[RecordProblem] = []
    lines = []
    for position, (offset, payload) in enumerate(scan_records(text, problems)):
        if key == "id":
            try:
                record_key = unpack(payload)[0].id
            except FormatError:
                raise FormatError(
                    f"the record at byte {offset} of {text!r} has no IRHeader ({len(payload)} bytes); "
                    f"index by position instead (--key position)"
                ) from None
        else:
            record_key = position
        lines.append(f"{record_key}\t{offset}\n")
    with open_text(idx_path, "w") as handle:
        handle.writelines(lines)
    return len(lines), problems
