#!/usr/bin/env bash
# The package as a user installs it. Builds the sdist and, from the sdist, the wheel (python -m build
# --no-isolation: .venv's setuptools, no network), checks what they hold, installs the wheel by the
# distribution's name into a fresh virtual environment that reuses .venv's dependencies (torch is not
# installed again), and runs the command from there, outside the repository: --version, then a real
# score-nbest, apply and evaluate on two sentences of the shipped sample.
#
# usage: bash scripts/check_package.sh   (scripts/test.sh runs it; about half a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=$repo/.venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "check_package: $*" >&2; exit 1; }

name=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["name"])')
version=$("$python" -c 'import rerank; print(rerank.__version__)')
"$python" -m build --no-isolation --outdir "$work/dist" . >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "python -m build failed"; }

# Both archives hold rerank.features (rerank/features is a link to features/) and the type marker.
"$python" - "$work/dist" "$name" "$version" <<'EOF' || fail "the archives lack files (above)"
import sys, tarfile, zipfile
from pathlib import Path

dist, name, version = Path(sys.argv[1]), sys.argv[2].replace("-", "_"), sys.argv[3]
wheel = zipfile.ZipFile(dist / f"{name}-{version}-py3-none-any.whl").namelist()
sdist = [n.split("/", 1)[1] for n in tarfile.open(dist / f"{name}-{version}.tar.gz").getnames() if "/" in n]
missing = [f"wheel: {f}" for f in ("rerank/features/nmt.py", "rerank/features/registry.py", "rerank/py.typed",
                                   "rerank/cli.py", f"{name}-{version}.dist-info/entry_points.txt") if f not in wheel]
missing += [f"sdist: {f}" for f in ("rerank/features/nmt.py", "pyproject.toml", "README.md") if f not in sdist]
print("\n".join(missing), file=sys.stderr)
sys.exit(bool(missing))
EOF

# A fresh environment without pip of its own (.venv's pip installs into it); .venv's site-packages on its
# path after its own, for torch and the other dependencies.
"$python" -m venv --without-pip "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/rerank-dependencies.pth"
# --force-reinstall --no-deps: .venv's own editable install of the same name is on that path too.
"$python" -m pip --python "$work/venv/bin/python" install -q --no-index --find-links "$work/dist" \
  --no-deps --force-reinstall "$name==$version" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "pip install $name failed"; }

cd "$work"  # nothing of the repository on the path from here on
installed=$("$work/venv/bin/python" -c 'import rerank.features.nmt as m; print(m.__file__)')
case "$installed" in "$site"/rerank/*) ;; *) fail "rerank is imported from $installed, not from the wheel";; esac
[ "$("$work/venv/bin/rerank" --version)" = "rerank $version" ] || fail "rerank --version does not say $version"

data=$repo/examples/data
head -n 2 "$data/val.en" >val.en
head -n 2 "$data/val.fr" >val.fr
"$python" -c 'import gzip, sys
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as lines:
    sys.stdout.writelines(line for line in lines if int(line.split(" ||| ", 1)[0]) < 2)' "$data/val.100best.gz" >val.nbest
"$work/venv/bin/rerank" -q score-nbest val.nbest --source val.en --model "$repo/examples/models/encdec" \
  --word-penalty -o val.scored
grep -q " RNN0= -[0-9]" val.scored || fail "score-nbest wrote no RNN0 scores"
printf 'RNN0: 0.2\nWP1: -0.1\n' >extra.yaml
"$work/venv/bin/rerank" -q apply val.scored --weights "$data/moses.ini" --weights extra.yaml -o val.1best
"$work/venv/bin/rerank" -q evaluate --tokenize none -r val.fr val.1best >bleu.txt
grep -q "BLEU" bleu.txt || fail "evaluate printed no BLEU"
echo "check_package: $name $version: sdist and wheel built, installed into a fresh environment, rerank runs"
