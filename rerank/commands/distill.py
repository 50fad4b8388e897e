"""Distil a teacher (one model or an ensemble) into a student: sequence-level knowledge distillation.

The teacher translates the training sources of the student's config (data.train.source) by beam search
(Kim & Rush 2016), and the student, that config's model, is trained on its translations: its best one per
source, or its --nbest N best, each paired with the source (--targets ensemble); or those and the
references as well (--targets ensemble+references: each source twice, once with its reference, so the
references must have the sources' number of lines). The teacher's models must share their vocabularies
(as `rerank translate --model A B C` has them) and read the student's source language. With --r2l-model,
right-to-left models rerank the teacher's beam before its best are kept, as `rerank translate --r2l-model`
reranks it (--r2l-weight chosen on held-out data with `rerank translate`).

Everything goes into --output-dir DIR: the translations in chunks of --chunk-lines source lines
(DIR/chunks/, Moses n-best lists, each written whole once done), the student's corpus (DIR/train.src and
DIR/train.trg, prepared into the student's directory like any other) and the student (DIR/student, as
`rerank train` writes it). Stopped (Ctrl-C, SIGTERM, or killed), the same command resumes: finished chunks
are not translated again, and the student's training resumes from its checkpoint; the outputs are those of
a run never stopped, byte for byte. A run with other translation settings than DIR/distill.yaml's is
refused. The student's config keys are those of `rerank train` (its data.train is replaced by the corpus;
its output_dir by DIR/student).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rerank.commands.arguments import positive_int
from rerank.commands.translate import add_right_to_left_arguments, add_search_arguments

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ()
INPUTS = ("teacher", "config", "r2l_model")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from rerank.study.distill import TARGETS

    parser.add_argument("--teacher", required=True, nargs="+", metavar="DIR",
                        help="model directories written by `rerank train`; several: their ensemble translates")
    parser.add_argument("--config", required=True, help="the student's training config (see `rerank train`)")
    parser.add_argument("--output-dir", required=True, metavar="DIR",
                        help="the translations, the student's corpus and the student (DIR/student)")
    parser.add_argument("--targets", choices=TARGETS, default="ensemble",
                        help="the student's targets: the teacher's translations alone, or beside the references "
                             "(default: %(default)s)")
    parser.add_argument("--chunk-lines", type=positive_int, default=1000, metavar="N",
                        help="source lines translated and written together: a resumed run starts at the first "
                             "chunk not written (default: %(default)s)")
    add_search_arguments(parser, nbest="keep the teacher's N best translations of each source (N <= K), each one "
                                       "a training pair (default 1)")
    add_right_to_left_arguments(parser)
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="CPU threads, of the translation and of the training (overrides training.threads)")
    parser.add_argument("--seed", type=int, help="the student's random seed (overrides training.seed)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from rerank.commands.translate import search_config
    from rerank.config import load_config_data, with_overrides
    from rerank.errors import RerankError
    from rerank.models.device import torch_threads
    from rerank.search.translate import BATCH_SIZE
    from rerank.study.distill import STUDENT, Distillation, train_student
    from rerank.training.config import TrainConfig, read_train_config
    from rerank.training.trainer import TrainingInterrupted

    config = read_train_config(load_config_data(args.config), str(args.config))
    if not isinstance(config, TrainConfig):
        raise RerankError(f"{args.config}: the student is a translation model, not a {config.model.architecture}")
    config = with_overrides(config, {"training.threads": args.threads, "training.seed": args.seed})
    if args.r2l_weight is not None and not args.r2l_model:
        raise RerankError("--r2l-weight is the weight of the --r2l-model models")
    weight = {} if args.r2l_weight is None else {"r2l_weight": args.r2l_weight}
    try:
        distillation = Distillation(tuple(args.teacher), search_config(args), args.targets, args.chunk_lines,
                                    args.batch_size or BATCH_SIZE, tuple(args.r2l_model or ()), **weight)
    except ValueError as e:
        raise RerankError(f"--r2l-weight: {e}") from None
    if Path(args.output_dir).is_file():
        raise RerankError(f"--output-dir {args.output_dir}: it is a file, not a directory")
    student = Path(args.output_dir) / STUDENT
    try:
        with torch_threads(args.threads):
            progress = train_student(config, distillation, Path(args.output_dir), args.device)
    except TrainingInterrupted as stopped:
        print(f"rerank: {student}: stopped by {stopped.args[0]}; its checkpoint is saved: run the same command "
              "again to resume", file=sys.stderr)
        return 128 + stopped.signum
    print(f"{student}: best validation perplexity {progress.best_ppl:.2f} after {progress.updates} updates "
          f"({progress.finished})")
    return 0
