"""Train an RNN encoder-decoder or RNNsearch model from a YAML config (resumes a stopped run).

The model directory (output_dir, or --output-dir) gets config.yaml, vocab.src.txt, vocab.trg.txt,
model.pt (the best weights by validation perplexity) and checkpoint.pt; started again, a run
resumes exactly where it stopped. Every value is checked when the config is read.

A config whose model.architecture is cslm trains a CSLM instead, a feed-forward n-gram language model of
the target language (its keys: rerank.training.cslm, configs/cslm.yaml).

Under torchrun (torchrun --nproc-per-node 4 -m rerank train --config C), the processes share each
update: training.batch_size is the global batch, each process scores every WORLD_SIZE-th pair of it,
the gradients are averaged (gloo), and process 0 alone validates, logs and writes the model
directory; a stopped run resumes exactly with the same number of processes. The config's
keys, with their defaults (configs/*.yaml are examples; those reading ../shared/data need it;
data needs either train or phrase_table):
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from rerank.commands.arguments import positive_int
from rerank.config import describe_keys, from_dict, load_config_data, with_overrides
from rerank.training.config import TrainConfig

if TYPE_CHECKING:
    import torch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="training config (see configs/*.yaml)")
    parser.add_argument("--output-dir", help="model directory (overrides output_dir of the config)")
    parser.add_argument("--threads", type=positive_int, help="CPU threads (overrides training.threads)")
    parser.add_argument("--seed", type=int, help="random seed (overrides training.seed): another model of an ensemble")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda or cuda:N (default: %(default)s; under torchrun cuda is each process's GPU)")
    parser.epilog = "\n".join(f"  {line}" for line in describe_keys(TrainConfig))


def run(args: argparse.Namespace) -> int:
    import torch

    from rerank.models.device import torch_device
    from rerank.training.distributed import process_group, world_from_env
    from rerank.training.trainer import Trainer

    device = torch_device(args.device)
    data = load_config_data(args.config)
    if isinstance(data, dict) and isinstance(data.get("model"), dict) and data["model"].get("architecture") == "cslm":
        return _train_cslm(args, data, device)
    config = with_overrides(from_dict(TrainConfig, data if data is not None else {}, str(args.config)),
                            _overrides(args))
    world = world_from_env()
    if args.device == "cuda" and world.distributed:  # each process its own GPU
        device = torch.device("cuda", world.local_rank)
    if not world.is_main:  # process 0 speaks for the run
        logging.getLogger("rerank").setLevel(logging.WARNING)
    _check_output_dir(config.output_dir)
    with process_group(world, device):
        progress = Trainer(config, world, device).train()
    if world.is_main:
        print(f"{config.output_dir}: best validation perplexity {progress.best_ppl:.2f} after {progress.updates} "
              f"updates ({progress.finished})")
    return 0


def _train_cslm(args: argparse.Namespace, data: dict[str, object], device: torch.device) -> int:
    """A CSLM (feed-forward n-gram language model) from its config (see configs/cslm.yaml)."""
    from rerank.training.cslm import CSLMTrainConfig, train_cslm

    config = with_overrides(from_dict(CSLMTrainConfig, data, str(args.config)), _overrides(args))
    _check_output_dir(config.output_dir)
    progress = train_cslm(config, device)
    print(f"{config.output_dir}: best validation perplexity {progress.best_ppl:.2f} (the network, on shortlist "
          f"n-grams) after {progress.updates} updates ({progress.finished})")
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """The config keys the flags set (an unset flag is None: the config's value stays)."""
    return {"output_dir": args.output_dir or None, "training.threads": args.threads or None,
            "training.seed": args.seed}


def _check_output_dir(path: str) -> None:
    """A model directory where a file is, found before the data are read."""
    import os

    from rerank.errors import RerankError

    if os.path.exists(path) and not os.path.isdir(path):
        raise RerankError(f"output_dir {path}: it is a file, not a directory")
