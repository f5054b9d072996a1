#!/usr/bin/env bash
# README command 1: install, build, and run fp8kit's main job on the bundled real training dump.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install/install-deps.sh
scripts/install/build.sh
echo "== fp8kit inspect data/example/llama_tiny_dump.h5"
build/tools/fp8kit inspect data/example/llama_tiny_dump.h5
