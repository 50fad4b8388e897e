"""The experiment config: read from YAML with its nested sections, and every combination the study cannot run
refused with the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rerank.config import from_dict
from rerank.errors import ConfigError
from rerank.study.config import ExperimentConfig, load_experiment, system_columns

BASE: dict[str, object] = {
    "output_dir": "run", "encdec": "encdec.yaml", "rnnsearch": "rnnsearch.yaml",
    "moses": {"ini": "moses.ini", "language_model": "lm.arpa"},
    "dev": {"source": "dev.en", "reference": "dev.fr", "nbest": "dev.nbest"},
    "test": {"source": "test.en", "reference": "test.fr", "nbest": "test.nbest"},
}


def test_an_experiment_reads_with_its_sections(tmp_path: Path) -> None:
    path = tmp_path / "experiment.yaml"
    moses = {"ini": "moses.ini", "language_model": "lm.arpa", "decoder": "moses"}
    path.write_text(yaml.safe_dump({**BASE, "seeds": [4], "decoder_tuning": {"systems": ["baseline"]}, "moses": moses}),
                    encoding="utf-8")
    config = load_experiment(path)
    assert config.seeds == (4,) and config.optimizers == ("mert", "pro", "mira")
    assert config.decoder_tuning is not None and config.decoder_tuning.systems == ("baseline",)
    assert config.split("dev").nbest == "dev.nbest" and config.split("test").source == "test.en"


@pytest.mark.parametrize(("settings", "message"), [
    ({"optimizers": ["sgd"]}, r"optimizer: expected one of mert, pro, mira, got 'sgd'"),
    ({"seeds": []}, "give at least one optimizer and one seed"),
    ({"cv_folds": 1}, r"cv_folds: expected 0 \(none\) or at least 2, got 1"),
    ({"list_sizes": [10, 0]}, r"list_sizes: expected sizes of at least 1, got \[10, 0\]"),
    ({"beam": 5, "nbest": 6}, r"nbest: expected at most beam \(5\)"),
    ({"moses": {"ini": "moses.ini", "language_model": "lm.arpa", "nbest_size": 100}},
     "moses.nbest_size: Moses decodes the lists: give moses.decoder too"),
    ({"decoder_tuning": {"systems": []}, "moses": {"ini": "i", "language_model": "l", "decoder": "moses"}},
     "give at least one system and one seed"),
    ({"length_penalty": "long"}, r"length_penalty'?: expected one of 'none', 'average', 'wu'"),
    ({"decoder_tuning": {"systems": ["rnnsearch+cslm"]}, "moses": {"ini": "i", "language_model": "l",
                                                                    "decoder": "moses"}},
     r"decoder_tuning.systems: 'rnnsearch\+cslm': expected baseline or columns joined by \+, each one of encdec, "
     r"rnnsearch, ensemble, channel, phrases, student \(with -per-word for the per-word form\), got 'cslm'"),
    ({"decoder_tuning": {"systems": ["ensemble+channel"]}, "channel": "fr-en.yaml",
      "moses": {"ini": "i", "language_model": "l", "decoder": "moses"}},
     r"decoder_tuning.systems: 'ensemble\+channel' has an ensemble column: give ensemble_seeds"),
    ({"decoder_tuning": {"systems": ["rnnsearch"], "activate": "some"}, "moses": {"ini": "i", "language_model": "l",
                                                                                  "decoder": "moses"}},
     r"activate'?: expected one of 'all', 'columns'"),
    ({"decoder_tuning": {"systems": ["rnnsearch+rnnsearch"]}, "moses": {"ini": "i", "language_model": "l",
                                                                         "decoder": "moses"}},
     r"'rnnsearch\+rnnsearch' names a column twice"),
    ({"decoder_tuning": {"systems": ["rnnsearch+channel"]}, "moses": {"ini": "i", "language_model": "l",
                                                                       "decoder": "moses"}},
     r"decoder_tuning.systems: 'rnnsearch\+channel' has a channel column: give channel"),
    ({"decoder_tuning": {"systems": ["rnnsearch+phrases"]}, "moses": {"ini": "i", "language_model": "l",
                                                                       "decoder": "moses"}},
     r"decoder_tuning.systems: 'rnnsearch\+phrases' has a phrases column: give phrases"),
    ({"decoder_tuning": {"systems": ["student+phrases"]}, "phrases": "phrases.yaml",
      "moses": {"ini": "i", "language_model": "l", "decoder": "moses"}},
     r"decoder_tuning.systems: 'student\+phrases' has a student column: give distill"),
])
def test_what_cannot_run_is_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^experiment.yaml: .*{message}"):
        from_dict(ExperimentConfig, {**BASE, **settings}, "experiment.yaml")


def test_the_ensembles_seeds_need_a_config_to_train(tmp_path: Path) -> None:
    settings = {**BASE, "rnnsearch": str(tmp_path), "ensemble_seeds": [2]}
    with pytest.raises(ConfigError, match="ensemble_seeds trains the rnnsearch config with other seeds"):
        from_dict(ExperimentConfig, settings, "experiment.yaml")
    assert from_dict(ExperimentConfig, {**settings, "rnnsearch": "rnnsearch.yaml"}).ensemble_seeds == (2,)


def test_a_systems_columns_in_order_each_with_its_form() -> None:
    assert system_columns("baseline") == ()
    assert system_columns("rnnsearch-per-word+channel") == (("rnnsearch", True), ("channel", False))
    assert system_columns("phrases+rnnsearch") == (("phrases", False), ("rnnsearch", False))
    settings = {**BASE, "channel": "fr-en.yaml", "moses": {"ini": "i", "language_model": "l", "decoder": "moses"},
                "decoder_tuning": {"systems": ["baseline", "rnnsearch+channel-per-word"]}}
    config = from_dict(ExperimentConfig, settings)
    assert config.decoder_tuning is not None and config.decoder_tuning.systems[1] == "rnnsearch+channel-per-word"
