"""rerank apply --nbest-out: the list re-sorted by the new score keeps a scored list's record."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rerank.cli import main
from rerank.formats.scored import describing_record, write_record

LINES = "0 ||| a b ||| WP1= -2 LM0= -3 ||| -5\n0 ||| c ||| WP1= -1 LM0= -6 ||| -7\n1 ||| d ||| WP1= -1 LM0= -1 ||| -2\n"


def test_the_resorted_list_keeps_the_record_of_its_features(tmp_path: Path) -> None:
    scored, resorted = tmp_path / "scored", tmp_path / "resorted"
    scored.write_text(LINES)
    features = {"WP1": {"kind": "word-penalty"}}
    write_record(scored, hashlib.sha256(LINES.encode()).hexdigest(), features)
    assert main(["-q", "apply", str(scored), "--weight", "WP1=1", "--weight", "LM0=0", "-o", str(tmp_path / "1best"),
                 "--nbest-out", str(resorted)]) == 0
    assert (tmp_path / "1best").read_text() == "c\nd\n"
    assert resorted.read_text().splitlines()[0].startswith("0 ||| c ||| ")
    record = describing_record(resorted)
    assert record is not None and record.features == features
