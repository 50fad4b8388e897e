"""Training a CSLM (:mod:`rerank.models.cslm`) on the target side of the training data, in the loop of every model
(:class:`~rerank.training.trainer.TrainingLoop`): shuffled batches of the n-grams whose predicted word is in the
shortlist, Adam or SGD, the network's perplexity on the validation text's shortlist n-grams; each epoch's order is
drawn from the seed and the epoch's number, so a resumed run goes on exactly.

The model directory gets config.yaml, vocab.txt (the shortlist: every word seen ``min_count`` times,
the ``max_words`` most frequent at most), model.pt (the best weights) and checkpoint.pt.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator

import numpy as np
import torch

from rerank.errors import ConfigError
from rerank.formats.files import read_lines
from rerank.models.checkpoint import CHECKPOINT
from rerank.models.cslm import VOCAB, CSLMNet, ngrams
from rerank.models.vocab import UNK_ID, Vocabulary
from rerank.training.config import CSLMData, CSLMTrainConfig, CSLMTraining
from rerank.training.trainer import Progress, Step, TrainingLoop

__all__ = ["CSLMData", "CSLMTrainConfig", "CSLMTrainer", "CSLMTraining", "train_cslm"]

logger = logging.getLogger(__name__)


def read_sentences(path: str) -> list[list[str]]:
    return [line.split() for _, line in read_lines(path)]


def shortlist_ngrams(sentences: list[list[str]], vocab: Vocabulary, order: int) -> np.ndarray:
    """Every (context, word) row of ``sentences`` whose word (or ``</s>``) is in the shortlist."""
    if not sentences:
        return np.empty((0, order), dtype=np.int64)
    rows = np.concatenate([ngrams(vocab.encode(s), order) for s in sentences])
    return np.ascontiguousarray(rows[rows[:, -1] != UNK_ID])


class CSLMTrainer(TrainingLoop[CSLMTrainConfig]):
    """Trains the CSLM of ``config`` into ``config.output_dir``, resuming if a checkpoint is there."""

    LOSS_PER = "n-gram"
    COUNTED = "n-grams"
    PERPLEXITY_OF = " on shortlist n-grams"

    model: CSLMNet

    def __init__(self, config: CSLMTrainConfig, device: str | torch.device = "cpu"):
        super().__init__(config, None, device)
        self._prepare_output()
        self._load_data()
        torch.manual_seed(config.training.seed)
        self.model = CSLMNet(config.model, len(self.vocab)).to(self.device)
        t = config.training
        self.optimizer = (
            torch.optim.Adam(self.model.parameters(), lr=t.learning_rate) if t.optimizer == "adam" else
            torch.optim.SGD(self.model.parameters(), lr=t.learning_rate, momentum=t.momentum))
        self._start_or_resume()
        logger.info("CSLM: %d parameters, %d-gram, shortlist of %d tokens; %d training n-grams, %d validation",
                    sum(p.numel() for p in self.model.parameters()), config.model.order, len(self.vocab),
                    len(self.train_rows), len(self.valid_rows))

    def _load_data(self) -> None:
        data, order = self.config.data, self.config.model.order
        train = read_sentences(data.train)
        if (self.out / CHECKPOINT).exists():
            self.vocab = Vocabulary.load(self.out / VOCAB)
        else:
            self.vocab = Vocabulary.build(train, data.max_words or 1 << 62, data.min_count)
            self.vocab.save(self.out / VOCAB)
        self.train_rows = shortlist_ngrams(train, self.vocab, order)
        self.valid_rows = shortlist_ngrams(read_sentences(data.valid), self.vocab, order)
        if not len(self.train_rows) or not len(self.valid_rows):
            raise ConfigError(f"no n-grams to {'train on' if not len(self.train_rows) else 'validate on'} "
                              f"({data.train if not len(self.train_rows) else data.valid})")

    @contextlib.contextmanager
    def _batches(self) -> Iterator[Step]:
        """Each epoch's n-grams in an order drawn from the seed and the epoch's number."""
        t = self.config.training
        orders: dict[int, np.ndarray] = {}

        def step(epoch: int, batch: int) -> tuple[float, int]:
            if epoch not in orders:
                orders.clear()
                orders[epoch] = np.random.default_rng([t.seed, epoch]).permutation(len(self.train_rows))
            rows = self.train_rows[orders[epoch][batch * t.batch_size:(batch + 1) * t.batch_size]]
            return self._update(rows), len(rows)

        yield step

    def _epoch_batches(self, epoch: int) -> int:
        return math.ceil(len(self.train_rows) / self.config.training.batch_size)

    def _perplexity(self) -> float:
        return network_perplexity(self.model, self.valid_rows)

    def _update(self, rows: np.ndarray) -> float:
        batch = torch.from_numpy(rows).to(self.device)
        nll = self.model.nll(batch[:, :-1], batch[:, -1])
        self.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(nll / len(rows))
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.training.clip_norm)
        self.optimizer.step()
        return float(nll.item())


def network_perplexity(net: CSLMNet, rows: np.ndarray, batch_size: int = 4096) -> float:
    """exp(−mean ln P_NN) of the network over (context, word) rows, the words in its shortlist."""
    net.eval()
    device = net.excluded.device
    nll = 0.0
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = torch.from_numpy(rows[start:start + batch_size]).to(device)
            nll += float(net.nll(batch[:, :-1], batch[:, -1]))
    return math.exp(nll / len(rows))


def train_cslm(config: CSLMTrainConfig, device: str | torch.device = "cpu") -> Progress:
    return CSLMTrainer(config, device).train()
