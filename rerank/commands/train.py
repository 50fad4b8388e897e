"""Train an RNN encoder-decoder or RNNsearch model from a YAML config (resumes a stopped run).

The model directory (output_dir, or --output-dir) gets config.yaml, vocab.src.txt, vocab.trg.txt,
model.pt (the best weights by validation perplexity) and checkpoint.pt; started again, a run
resumes exactly where it stopped. Stopped by Ctrl-C (SIGINT) or SIGTERM, a run first saves its checkpoint
at the end of the update and exits with status 130 or 143. Every value is checked when the config is read.

A config whose model.architecture is cslm trains a CSLM instead, a feed-forward n-gram language model of
the target language (its keys: rerank.training.cslm, configs/training/cslm.yaml).

Under torchrun (torchrun --nproc-per-node 4 -m rerank train --config C), the processes share each
update: training.batch_size is the global batch, each process scores every WORLD_SIZE-th pair of it,
the gradients are averaged (gloo), and process 0 alone validates, logs and writes the model
directory; a stopped run resumes exactly with the same number of processes. The config's
keys, with their defaults (configs/training/ holds examples; those reading ../shared/data need it;
data needs either train or phrase_table):
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

from rerank.commands.arguments import positive_int
from rerank.config import describe_keys, load_config_data, with_overrides
from rerank.errors import RerankError
from rerank.training.config import CSLMTrainConfig, TrainConfig, read_train_config

if TYPE_CHECKING:
    import torch

    from rerank.training.distributed import World
    from rerank.training.trainer import TrainingLoop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="training config (see configs/training/)")
    parser.add_argument("--output-dir", help="model directory (overrides output_dir of the config)")
    parser.add_argument("--threads", type=positive_int, help="CPU threads (overrides training.threads)")
    parser.add_argument("--seed", type=int, help="random seed (overrides training.seed): another model of an ensemble")
    parser.add_argument("--init-from", metavar="MODEL_DIR",
                        help="fine-tuning: start from this trained model's weights, with its vocabularies (overrides "
                             "training.init_from; the model sections must build the same weights)")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda or cuda:N (default: %(default)s; under torchrun cuda is each process's GPU)")
    parser.epilog = "\n".join(f"  {line}" for line in describe_keys(TrainConfig))


def run(args: argparse.Namespace) -> int:
    import torch

    from rerank.models.device import torch_device
    from rerank.training.distributed import World, process_group, world_from_env
    from rerank.training.trainer import TrainingInterrupted

    device = torch_device(args.device)
    config = read_train_config(load_config_data(args.config), str(args.config))
    if args.init_from is not None and isinstance(config, CSLMTrainConfig):
        raise RerankError(f"--init-from: {args.config} trains a CSLM, which starts from its own weights; "
                          "fine-tuning starts a translation model from another's")
    config = with_overrides(config, _overrides(args))
    world = world_from_env() if isinstance(config, TrainConfig) else World()
    if args.device == "cuda" and world.distributed:  # each process its own GPU
        device = torch.device("cuda", world.local_rank)
    if not world.is_main:  # process 0 speaks for the run
        logging.getLogger("rerank").setLevel(logging.WARNING)
    _check_output_dir(config.output_dir)
    try:
        with process_group(world, device):
            progress = _trainer(config, world, device).train()
    except TrainingInterrupted as stopped:
        if world.is_main:
            under = f" under torchrun, with {world.size} processes again" if world.distributed else ""
            print(f"rerank: {config.output_dir}: stopped by {stopped.args[0]}; its checkpoint is saved: run the same "
                  f"command again to resume{under}: {resume_command(args)}", file=sys.stderr)
        return 128 + stopped.signum
    if world.is_main:
        last = progress.history[-1]["valid_ppl"] if progress.history else math.nan
        kept = f"; model.pt: the last weights (perplexity {last:.2f})" if config.training.keep_weights == "last" else ""
        print(f"{config.output_dir}: best validation perplexity {progress.best_ppl:.2f}"
              f"{' (the network, on shortlist n-grams)' if isinstance(config, CSLMTrainConfig) else ''} after "
              f"{progress.updates} updates ({progress.finished}){kept}")
    return 0


def _trainer(config: TrainConfig | CSLMTrainConfig, world: World, device: torch.device) -> TrainingLoop[Any]:
    """The trainer of the config's kind of model."""
    if isinstance(config, CSLMTrainConfig):
        from rerank.training.cslm import CSLMTrainer

        return CSLMTrainer(config, device)
    from rerank.training.trainer import Trainer

    return Trainer(config, world, device)


def resume_command(args: argparse.Namespace) -> str:
    """The command that resumes the run: every option it was given, shell-quoted."""
    words = ["rerank", *(["-q"] if getattr(args, "quiet", False) else []), "train", "--config", str(args.config)]
    for option, value in (("--output-dir", args.output_dir), ("--threads", args.threads), ("--seed", args.seed),
                          ("--init-from", args.init_from)):
        if value is not None:
            words += [option, str(value)]
    if args.device != "cpu":
        words += ["--device", args.device]
    return shlex.join(words)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """The config keys the flags set (an unset flag is None: the config's value stays)."""
    return {"output_dir": args.output_dir or None, "training.threads": args.threads or None,
            "training.seed": args.seed, "training.init_from": args.init_from}


def _check_output_dir(path: str) -> None:
    """A model directory where a file is, found before the data are read."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise RerankError(f"output_dir {path}: it is a file, not a directory")
