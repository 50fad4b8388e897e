"""The recipe table of docs/results/recipe.md: for each model directory, its training (updates, epochs, minutes,
from its checkpoint.pt), its parameters, its validation perplexity per Moses word and its BLEU alone.

The perplexity is exp(−Σ ln p / Σ (words + 1)) of the reference translations, with ln p each sentence's
score as rescoring computes it (a subword model's summed over its pieces, ``</s>`` included): comparable
between word and subword models, except that a word model's shortlist scores rare words as ``<unk>``
(which flatters it). BLEU: beam search (``--beam``, length-normalised as ``rerank translate``) on the
source, sacrebleu's corpus BLEU against the reference, tokenize none (the text is tokenised and
lowercased), the signature printed.

    python bench/recipe_table.py baseline=runs/recipe/baseline recipe=runs/recipe/recipe --threads 1

The timings are wall-clock, on whatever else the machine is running.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import sacrebleu
import torch
from quick import parse_args

from rerank.models.checkpoint import CHECKPOINT, load_model, load_state
from rerank.scoring.pairs import Scorer
from rerank.search.beam import SearchConfig
from rerank.search.translate import translate

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "multi30k" / "tok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="NAME=MODEL_DIR")
    parser.add_argument("--source", default=str(DATA / "val.lc.norm.tok.en"))
    parser.add_argument("--reference", default=str(DATA / "val.lc.norm.tok.fr"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lines", type=int, help="the first N lines only (a quick check)")
    args = parse_args(parser, {"lines": 4, "beam": 2})
    torch.set_num_threads(args.threads)
    sources = [line.split() for line in Path(args.source).read_text(encoding="utf-8").splitlines()]
    references = Path(args.reference).read_text(encoding="utf-8").splitlines()
    sources, references = sources[: args.lines], references[: args.lines]
    split = Path(args.reference).name.split(".")[0]  # val, test_2016_flickr, ...
    print(f"| model | parameters | updates | epochs | training | {split} ppl (per word) | {split} BLEU | decoding |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    signature = ""
    histories: dict[str, list[dict[str, float]]] = {}
    for spec in args.models:
        name, _, directory = spec.partition("=")
        loaded = load_model(directory)
        trained = Path(directory) / CHECKPOINT  # none in an averaged or shipped model's directory
        progress = load_state(trained)["progress"] if trained.exists() else \
            {"updates": "—", "epoch": "", "batch": "", "seconds": math.nan, "history": []}
        parameters = sum(p.numel() for p in {id(p): p for p in loaded.model.parameters()}.values())
        with torch.inference_mode():
            log_p = sum(Scorer(loaded.model, loaded.src_vocab, loaded.trg_vocab).score(
                (src, ref.split()) for src, ref in zip(sources, references, strict=True)))
        words = sum(len(ref.split()) + 1 for ref in references)
        tokens = sum(len(loaded.trg_vocab.encode(ref.split())) + 1 for ref in references)  # pieces, or words
        histories[name] = [{"updates": h["updates"], "seconds": h["seconds"],
                            "ppl": math.exp(math.log(h["valid_ppl"]) * tokens / words)} for h in progress["history"]]
        started = time.monotonic()
        with torch.inference_mode():
            outputs = [" ".join(loaded.trg_vocab.words(hypotheses[0].tokens)) for hypotheses in
                       translate(loaded.model, loaded.src_vocab, sources, SearchConfig(beam_size=args.beam))]
        decoding = time.monotonic() - started
        bleu = sacrebleu.metrics.BLEU(tokenize="none", force=True)  # tokenised text, as Moses' mert counts it
        score = bleu.corpus_score(outputs, [references])
        signature = str(bleu.get_signature())
        epochs = f"{progress['epoch']} + {progress['batch']} batches" if trained.exists() else ""
        minutes = f"{float(progress['seconds']) / 60:.1f} min" if trained.exists() else "—"
        print(f"| {name} | {parameters / 1e6:.2f}M | {progress['updates']} | {epochs} | "
              f"{minutes} | "
              f"{math.exp(-log_p / words):.2f} | {score.score:.2f} | {decoding:.0f} s |", flush=True)
    print(f"\nBLEU: sacrebleu {signature}; beam {args.beam}; {args.threads} thread(s)")
    print("\nValidation perplexity per word at each validation (the trainer's, per model token, converted), "
          "and the training minutes it took:\n")
    for name, history in histories.items():
        print(f"- {name}: " + ", ".join(f"{int(h['updates'])}: {h['ppl']:.2f} ({h['seconds'] / 60:.1f} min)"
                                          for h in history))


if __name__ == "__main__":
    main()
