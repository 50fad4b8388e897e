#!/usr/bin/env bash
# Install everything (see setup.sh), then check and test: ruff (lint and import order), mypy --strict on
# the rerank package, the package as a user installs it (check_package.sh: the sdist and the wheel built,
# the wheel installed into a fresh environment, the command run from there), the documentation site
# (mkdocs build --strict, into the ignored site/), and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,docs,ray,hf,ctranslate2
.venv/bin/ruff check .
.venv/bin/mypy
bash scripts/check_package.sh
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
.venv/bin/python -m pytest -q "$@"
