"""What a malicious ``.pt`` file could hold: an object whose unpickling runs code."""

from __future__ import annotations

from pathlib import Path


class Payload:
    """Pickles as a call to ``Path.touch(marker)``: if ``marker`` exists after a load, the file's code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return Path.touch, (self.marker,)
