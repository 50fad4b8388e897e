"""A stand-in decoder for tests of ``rerank tune --decoder``: its n-best list depends on the weights.

Its search space is a fixed Moses n-best list (``--space``): for every input sentence (``source sentence K``
stands for sentence K of the space, anywhere in the input; another line for its own line number) it prints,
in Moses' n-best format, the ``--nbest-size`` hypotheses with the highest score features · weights,
best first. The weights come as Moses' ``-weight-overwrite`` string or as a YAML weights file.
"""

import argparse
import gzip
import sys

import yaml


def parse_features(text):
    labels, values, label = [], {}, None
    for token in text.split():
        if token.endswith("="):
            label = token[:-1]
            labels.append(label)
            values[label] = []
        else:
            values[label].append(float(token))
    return labels, values


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--space", required=True)
    parser.add_argument("--weight-overwrite")
    parser.add_argument("--weights")
    parser.add_argument("--nbest-size", type=int, default=20)
    parser.add_argument("--nbest", default="-")
    parser.add_argument("--input", default="-")
    args = parser.parse_args()
    if args.weights:
        with open(args.weights, encoding="utf-8") as f:
            weights = {k: v if isinstance(v, list) else [v] for k, v in yaml.safe_load(f).items()}
    else:
        _, weights = parse_features(args.weight_overwrite)
    space = {}
    with gzip.open(args.space, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("|||")
            labels, values = parse_features(fields[2])
            score = sum(w * v for label in labels for w, v in zip(weights.get(label, []), values[label], strict=False))
            space.setdefault(int(fields[0]), {}).setdefault(fields[1].strip(), (score, fields[2].strip()))
    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    lines = [line.split() for line in source]
    out = sys.stdout if args.nbest == "-" else open(args.nbest, "w", encoding="utf-8")
    for sentence, words in enumerate(lines):
        # "source sentence 7" is translated from sentence 7 of the space, wherever it is in the input
        key = int(words[-1]) if words and words[-1].isdigit() else sentence
        ranked = sorted(space[key].items(), key=lambda item: -item[1][0])[: args.nbest_size]
        for hypothesis, (score, features) in ranked:
            out.write(f"{sentence} ||| {hypothesis} ||| {features} ||| {score:.6g}\n")
    out.close()
    print(f"translated {len(lines)} sentences", file=sys.stderr)


if __name__ == "__main__":
    main()
