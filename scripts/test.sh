#!/usr/bin/env bash
# Install everything (see setup.sh), then check and test: ruff (lint and import order), mypy --strict on
# the rerank package, and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test,ray
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
