"""Speed of the pretrained models' features against nmt on the CPU: the same n-best list scored by ``hf``,
``ctranslate2`` (fp32 and int8) and ``nmt`` (the shipped RNNsearch), in hypotheses per second.

No pretrained weights are downloaded: the Transformer is a random Marian model (OPUS-MT's architecture and
tokenizer) built here of about RNNsearch's size (``--d-model``, ``--layers``, ``--vocab``: by default 1.94M
parameters, as RNNsearch has), its SentencePiece model trained on Multi30k's training text; its
speed is that of a trained model of its size (the scores are meaningless). It is converted for CTranslate2
as ``ct2-transformers-converter`` does. Each feature is built once (the load is timed apart) and scores the
first ``--sentences`` sentences of the val 100-best list (``moses-multi30k/nbest``) through the library of
``rerank score-nbest`` (blocks of 64 sentences), ``--repeat`` times in turn; the medians of wall and CPU
time are printed, with hypotheses/s by CPU time (the steadier figure on a shared machine; with one thread, the
wall time of an idle one) and that times the millions of parameters. Needs the hf and ctranslate2
extras.

    python bench/bench_pretrained.py                    # ../shared beside the repository
    python bench/bench_pretrained.py --sentences 100 --threads 1 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # tiny_models: the Marian model of the tests, at another size

from quick import first_sentences, parse_args  # noqa: E402

RNNSEARCH = REPO / "examples" / "models" / "rnnsearch"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared", help="the folder holding data/")
    parser.add_argument("--sentences", type=int, default=100, help="the list's first N sentences (default 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch's and CTranslate2's threads (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each feature, in turn (default 3)")
    parser.add_argument("--vocab", type=int, default=8000, help="the SentencePiece vocabulary (default 8000)")
    parser.add_argument("--d-model", type=int, default=128, help="the Transformer's width (default 128)")
    parser.add_argument("--layers", type=int, default=2, help="its encoder and decoder layers (default 2)")
    parser.add_argument("--train-lines", type=int, default=10000,
                        help="lines of each side of Multi30k's training text for SentencePiece (default 10000)")
    args = parse_args(parser, {"sentences": 2, "repeat": 1, "vocab": 300, "d_model": 16, "layers": 1,
                               "train_lines": 300}, argv)
    import numpy as np
    import torch
    from tiny_models import ctranslate2_conversion, tiny_marian

    from rerank.features.pretrained import MosesText
    from rerank.features.registry import build_feature
    from rerank.formats.nbest import read_nbest
    from rerank.rescore.append import score_nbest

    torch.set_num_threads(args.threads)
    data = args.shared / "data"
    tok = data / "multi30k" / "tok"
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        nbest = first_sentences(data / "moses-multi30k" / "nbest" / "val.100best.gz", args.sentences,
                                work / "val.head.gz")
        source = str(tok / "val.lc.norm.tok.en")
        hypotheses = sum(1 for _ in read_nbest(nbest))
        lines = []
        for language in ("en", "fr"):
            plain = MosesText(language)
            with open(tok / f"train.lc.norm.tok.{language}", encoding="utf-8") as f:
                lines += [plain(line.split()) for _, line in zip(range(args.train_lines), f, strict=False)]
        start = time.perf_counter()
        marian = tiny_marian(work / "marian", lines, vocab_size=args.vocab, d_model=args.d_model,
                             layers=args.layers, ffn=4 * args.d_model, heads=max(1, args.d_model // 32),
                             max_positions=512)
        converted = ctranslate2_conversion(marian, work / "marian-ct2")
        print(f"built the Marian model and its conversion in {time.perf_counter() - start:.0f} s")
        pretrained = {"source_language": "en", "target_language": "fr", "threads": args.threads}
        specs = {"nmt (RNNsearch)": {"kind": "nmt", "model": str(RNNSEARCH)},
                 "hf": {"kind": "hf", "model": str(marian), "source_language": "en", "target_language": "fr"},
                 "ctranslate2 fp32": {"kind": "ctranslate2", "model": str(converted), **pretrained},
                 "ctranslate2 int8": {"kind": "ctranslate2", "model": str(converted), "precision": "int8",
                                      **pretrained}}
        parameters = {"nmt (RNNsearch)": rnnsearch_parameters(), "hf": marian_parameters(marian)}
        parameters["ctranslate2 fp32"] = parameters["ctranslate2 int8"] = parameters["hf"]
        features, loads = {}, {}
        for name, spec in specs.items():
            start = time.perf_counter()
            features[name] = build_feature(spec)
            loads[name] = time.perf_counter() - start
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in specs}
        values: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):
            for name, feature in features.items():
                out = work / "out.nbest"
                wall, cpu = time.perf_counter(), time.process_time()
                score_nbest(read_nbest(nbest), out, [feature], nbest_name=nbest.name, source=source, overlap=False)
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
                values[name] = np.array([entry.dense[-1] for entry in read_nbest(out)])
        print(f"{hypotheses:,} hypotheses of the first {args.sentences} sentences of val.100best.gz, "
              f"{args.threads} thread(s), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        print(f"{'feature':<18} {'parameters':>10} {'load s':>6} {'wall s':>7} {'CPU s':>6} {'hyps/s':>7} "
              f"{'hyps/s x M params':>17}   (medians; hyps/s by CPU time)")
        for name in specs:
            wall = statistics.median(t[0] for t in times[name])
            cpu = statistics.median(t[1] for t in times[name])
            rate = hypotheses / cpu
            print(f"{name:<18} {parameters[name]:>10,} {loads[name]:>6.1f} {wall:>7.2f} {cpu:>6.2f} {rate:>7,.0f} "
                  f"{rate * parameters[name] / 1e6:>17,.0f}")
        difference = np.abs(values["ctranslate2 fp32"] - values["hf"]).max()
        int8 = np.abs(values["ctranslate2 int8"] - values["ctranslate2 fp32"])
        print(f"ctranslate2 fp32 against hf: largest difference {difference:.2e} nats (as written: 6 digits); "
              f"int8 against fp32: "
              f"median {np.median(int8):.3f}, largest {int8.max():.3f} nats")
    return 0


def rnnsearch_parameters() -> int:
    from rerank.models.checkpoint import load_model

    return sum(p.numel() for p in load_model(RNNSEARCH).model.parameters())


def marian_parameters(directory: Path) -> int:
    from transformers import AutoModelForSeq2SeqLM

    return sum(p.numel() for p in AutoModelForSeq2SeqLM.from_pretrained(directory).parameters())


if __name__ == "__main__":
    sys.exit(main())
