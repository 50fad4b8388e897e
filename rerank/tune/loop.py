"""The tuning loop of ``mert-moses.pl``, for any decoder: decode, accumulate, re-optimise.

Each iteration runs the decoder on the tuning source with the current weights, merges its
n-best list with those of all earlier iterations, and optimises the weights on them. It stops
when no weight moves by ``min_change`` or after ``max_iterations`` decoder runs. Everything an
iteration makes stays in the work directory: ``runN.weights.yaml``, ``runN.bestK.out.gz`` (the
n-best list), ``runN.out`` (the decoder's stdout when the n-best list goes to a file),
``runN.decoder.log`` (its stderr) and ``runN.tuned.yaml`` (what the optimisation found, written
last); ``loop.yaml`` says which loop it is. Run again on the same work directory, a stopped loop
resumes after its last finished iteration, as ``mert-moses.pl --continue`` does.

The decoder is a shell command template with placeholders:

``{weights_overwrite}``
    the weights in Moses' ``-weight-overwrite`` syntax, ``LM0= 0.5 TranslationModel0= 0.1 0.2``,
    as one shell word;
``{weights_file}``
    a YAML weights file (``runN.weights.yaml``);
``{nbest}``
    the file the decoder should write its n-best list to; without it, the n-best list is read
    from the decoder's stdout;
``{nbest_size}``
    the n-best list size of the configuration;
``{source}``
    the tuning source; without it, the source is given on the decoder's stdin.

For Moses: ``moses -f moses.ini -n-best-list {nbest} {nbest_size} distinct -weight-overwrite {weights_overwrite}``
(or ``-n-best-list - ...`` to have the n-best list on stdout). Every value is quoted by rerank
(:mod:`rerank.tune.templates`: ``'{nbest}'`` is read as ``{nbest}``), the labels and weights are checked
before the first command line is made, and the decoder runs in its own process group, ended with rerank.

With :class:`~rerank.tune.parallel.Jobs` of N > 1 (``--jobs N``), each iteration runs the decoder on N parts
of the source at once, locally or through a cluster's submit command, and joins their n-best lists (see
:mod:`rerank.tune.parallel`); the result is the same n-best list.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from rerank.config import load_yaml
from rerank.errors import RerankError
from rerank.formats.files import atomic_output, make_output_dir, read_lines, work_file
from rerank.formats.moses_ini import Weights, format_weight
from rerank.formats.nbest import FeatureLayout
from rerank.formats.weights import as_weights, save_weights, weight_vector
from rerank.processes import run as run_command
from rerank.tune.config import TuneConfig
from rerank.tune.data import NBestPool
from rerank.tune.mert import l1_normalised
from rerank.tune.optimize import corpus_bleu, optimize
from rerank.tune.parallel import Jobs, Part, decode_in_parts, split_source
from rerank.tune.stats import log_bleu
from rerank.tune.templates import Template

logger = logging.getLogger(__name__)

LOOP_FILE = "loop.yaml"  # in the work directory: which loop it holds
PLACEHOLDERS = ("weights_overwrite", "weights_file", "nbest", "nbest_size", "source")
DECODER_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")  # a feature label a decoder's command line may carry


def weights_overwrite(weights: Weights) -> str:
    """Moses' ``-weight-overwrite`` value: ``LM0= 0.5 TranslationModel0= 0.1 0.2``."""
    return " ".join(f"{label}= " + " ".join(format_weight(v) for v in values) for label, values in weights.items())


def check_decoder_weights(weights: Weights, source: str) -> None:
    """Labels a decoder reads as labels (a letter, then letters, digits, ``_``, ``.``, ``-``) and finite weights,
    checked before any command line holds them."""
    for label, values in weights.items():
        if not DECODER_LABEL.fullmatch(label):
            raise RerankError(f"{source}: feature label {label!r} cannot go to the decoder: expected a letter "
                              "followed by letters, digits, '_', '.' or '-'")
        if not all(math.isfinite(v) for v in values):
            raise RerankError(f"{source}: {label}: expected finite weights, got {' '.join(map(str, values))}")


@dataclass(frozen=True)
class DecoderCommand:
    """A decoder command line with placeholders (see the module documentation)."""

    template: str

    def __post_init__(self) -> None:
        if not self.parsed.names & {"weights_overwrite", "weights_file"}:
            raise RerankError("--decoder: the command must pass the weights with {weights_overwrite} or {weights_file}")

    @property
    def parsed(self) -> Template:
        return Template(self.template, "--decoder", PLACEHOLDERS)

    @property
    def reads_stdin(self) -> bool:
        return "source" not in self.parsed.names

    @property
    def writes_nbest_file(self) -> bool:
        return "nbest" in self.parsed.names

    def render(self, values: Mapping[str, str]) -> str:
        """The command with every placeholder replaced by ``values[name]``, quoted for the shell."""
        return self.parsed.render(values)


@dataclass(frozen=True)
class Iteration:
    """One decoder run and the optimisation after it."""

    number: int
    decoder_bleu: float  # BLEU of the decoder's 1-best output (0-100)
    tuned_bleu: float    # BLEU of the tuned weights on all n-best lists so far
    hypotheses: int      # distinct hypotheses so far
    change: float        # the largest change of a weight
    weights: np.ndarray  # the tuned weights (D,)


@dataclass(frozen=True)
class LoopResult:
    weights: np.ndarray  # (D,) L1-normalised
    layout: FeatureLayout
    iterations: tuple[Iteration, ...]
    converged: bool      # stopped because no weight moved, not by the iteration limit


class TuningLoop:
    """Decoder runs and optimisations until the weights settle.

    :param pool: an empty pool for the tuning set's references.
    :param jobs: how many parts of the source the decoder runs on at once, and how.
    """

    def __init__(self, command: DecoderCommand, source: Path, pool: NBestPool, config: TuneConfig, work_dir: Path,
                 jobs: Jobs | None = None, references: Sequence[str] = ()):
        self.command = command
        self.source = source
        self.pool = pool
        self.config = config
        self.work_dir = work_dir
        self.jobs = jobs or Jobs()
        self.references = references  # the first reference file's lines: the first list is checked against them
        self._parts: list[Part] | None = None

    def run(self, initial: Weights, align: Callable[[FeatureLayout], np.ndarray]) -> LoopResult:
        """Tune from ``initial``, the weights of the first decoder run; ``align`` gives them as a
        vector for the features of its n-best list.

        A work directory that holds finished iterations of the same loop (same decoder command,
        source and settings) is resumed: their n-best lists rejoin the pool and the loop goes on
        after the last of them, as an uninterrupted run would (each iteration's random choices come
        from the seed and its number).
        """
        check_decoder_weights(initial, "the starting weights")
        make_output_dir(self.work_dir, "--work-dir")
        self._claim_work_dir()
        loop = self.config.loop
        decoder_weights: Weights = dict(initial)
        current: np.ndarray | None = None
        history: list[Iteration] = []
        for number in range(1, loop.max_iterations + 1):
            resumed = self._finished(number)
            decoded = self._nbest(number).exists()  # by an earlier run, which may have stopped before optimising
            nbest = self._nbest(number) if decoded else self._decode(number, decoder_weights)
            first = self.pool.add(nbest)
            if number == 1 and self.references:
                self.pool.warn_about(nbest, first, self.references, self.config.bleu.lowercase)
            if not decoded:
                self._compress(nbest)
            data = self.pool.data()
            if current is None:
                current = l1_normalised(align(data.layout))
            if resumed is not None:
                record = resumed(data.layout)
                logger.info("iteration %d: done already (decoder 1-best BLEU %.2f, tuned BLEU %.2f)", number,
                            record.decoder_bleu, record.tuned_bleu)
            else:
                chosen = data.stats[np.arange(data.num_sentences), first].sum(axis=0)
                decoder_bleu = 100.0 * math.exp(log_bleu(chosen))
                rng = np.random.default_rng([self.config.seed, number])
                tuned = optimize(data, current, self.config, rng)
                change = float(np.abs(tuned - current).max())
                record = Iteration(number, decoder_bleu, corpus_bleu(data, tuned), self.pool.size, change, tuned)
                self._save(record, data.layout)
                logger.info("iteration %d: decoder 1-best BLEU %.2f; tuned BLEU %.2f on the %d distinct hypotheses "
                            "of runs 1-%d; largest weight change %.2g", number, decoder_bleu, record.tuned_bleu,
                            record.hypotheses, number, change)
            history.append(record)
            current = record.weights
            if record.change < loop.min_change:
                logger.info("no weight moved by %g or more: stopping", loop.min_change)
                return LoopResult(current, data.layout, tuple(history), True)
            decoder_weights = as_weights(current, data.layout)
        logger.info("stopping after %d iterations", loop.max_iterations)
        assert current is not None and self.pool.layout is not None  # at least one iteration ran
        return LoopResult(current, self.pool.layout, tuple(history), False)

    def _claim_work_dir(self) -> None:
        """Write what this loop is (``loop.yaml``), or check that the work directory holds the same loop."""
        identity = {"decoder": self.command.template, "source": str(self.source.resolve()),
                    "nbest_size": self.config.loop.nbest_size, "optimizer": self.config.optimizer,
                    "seed": self.config.seed}
        path = self.work_dir / LOOP_FILE
        if path.exists():
            saved = load_yaml(path)
            if saved != identity:
                changed = [key for key in identity if not isinstance(saved, dict) or saved.get(key) != identity[key]]
                raise RerankError(f"{self.work_dir} holds a tuning run with another {', '.join(changed)} ({path}): "
                                  "give another --work-dir, or delete it to start afresh")
        else:
            with atomic_output(path) as out:
                yaml.safe_dump(identity, out, sort_keys=False, allow_unicode=True)

    def _nbest(self, number: int) -> Path:
        return self.work_dir / f"run{number}.best{self.config.loop.nbest_size}.out.gz"

    def _record(self, number: int) -> Path:
        return self.work_dir / f"run{number}.tuned.yaml"

    def _finished(self, number: int) -> Callable[[FeatureLayout], Iteration] | None:
        """Iteration ``number`` read back from the work directory (given the pool's layout), or None if it
        did not finish."""
        record, nbest = self._record(number), self._nbest(number)
        if not (record.exists() and nbest.exists()):
            return None
        saved = load_yaml(record)

        def read(layout: FeatureLayout) -> Iteration:
            weights = weight_vector({k: tuple(v) for k, v in saved["weights"].items()}, layout, source=str(record))
            return Iteration(number, saved["decoder_bleu"], saved["tuned_bleu"], saved["hypotheses"],
                             saved["change"], weights)
        return read

    def _save(self, record: Iteration, layout: FeatureLayout) -> None:
        """``runN.tuned.yaml``: what iteration N found, written last, so that it marks the iteration as done."""
        data = {"decoder_bleu": record.decoder_bleu, "tuned_bleu": record.tuned_bleu,
                "hypotheses": record.hypotheses, "change": record.change,
                "weights": {label: list(values) for label, values in as_weights(record.weights, layout).items()}}
        with atomic_output(self._record(record.number)) as out:
            yaml.safe_dump(data, out, sort_keys=False)

    def _decode(self, number: int, weights: Weights) -> Path:
        """Run the decoder; returns its (uncompressed) n-best list."""
        size = self.config.loop.nbest_size
        nbest = self.work_dir / f"run{number}.best{size}.out"
        weights_file = self.work_dir / f"run{number}.weights.yaml"
        save_weights(weights, weights_file)
        values = {"weights_overwrite": weights_overwrite(weights), "weights_file": str(weights_file),
                  "nbest_size": str(size)}
        if self.jobs.parallel:
            if self._parts is None:
                self._parts = split_source(self.source, self.jobs.count, self.work_dir)
            values["weights_file"] = str(weights_file.resolve())
            decode_in_parts(values, self.command.render, self._parts, self.jobs, number, self.work_dir, nbest,
                            writes_nbest_file=self.command.writes_nbest_file, reads_stdin=self.command.reads_stdin)
            return nbest
        command = self.command.render({**values, "nbest": str(nbest), "source": str(self.source)})
        stdout = self.work_dir / f"run{number}.out" if self.command.writes_nbest_file else nbest
        log = self.work_dir / f"run{number}.decoder.log"
        logger.info("iteration %d: %s", number, command)
        with contextlib.ExitStack() as files:
            stdin = files.enter_context(open(self.source, "rb")) if self.command.reads_stdin else subprocess.DEVNULL
            out, err = files.enter_context(work_file(stdout)), files.enter_context(work_file(log))
            status = run_command(command, stdin=stdin, stdout=out, stderr=err)
        if status != 0:
            tail = log.read_bytes().decode("utf-8", "replace").splitlines()[-5:]
            raise RerankError(f"the decoder failed with exit status {status} in iteration {number}: {command}"
                              + "".join(f"\n  {line}" for line in tail) + f"\n  (all of its stderr: {log})")
        if not nbest.exists() or nbest.stat().st_size == 0:
            raise RerankError(f"the decoder wrote no n-best list to {nbest} in iteration {number}: {command}")
        return nbest

    @staticmethod
    def _compress(nbest: Path) -> None:
        """Keep the n-best list as ``.gz``, as ``mert-moses.pl`` does."""
        with atomic_output(nbest.with_name(nbest.name + ".gz")) as out:
            for _, line in read_lines(nbest):
                out.write(line + "\n")
        nbest.unlink()
