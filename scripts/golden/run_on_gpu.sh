#!/usr/bin/env bash
# Runs on the GPU machine: makes the golden conversion data (tests/golden) and the example dump
# (data/example), each packed into one archive under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/golden /tmp/example
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
nvcc -arch=sm_90 -O2 scripts/golden/cvt_tables.cu -o /tmp/cvt_tables -lz || exit 1
python3 -c "import ml_dtypes, numpy, torch; print(ml_dtypes.__version__, numpy.__version__, torch.__version__)"
PYTHONUNBUFFERED=1 python3 scripts/golden/make_golden.py /tmp/golden /tmp/cvt_tables 2>&1 | tail -20
tar -C /tmp -czf "$OUT/golden.tar.gz" golden
PYTHONUNBUFFERED=1 python3 scripts/make_example_dump.py /tmp/example 2>&1 | tail -20
tar -C /tmp -czf "$OUT/example.tar.gz" example
ls -la "$OUT"
