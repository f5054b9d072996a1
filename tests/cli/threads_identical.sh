#!/usr/bin/env bash
# Issue 22: the same output for any thread count, byte for byte. Tensors spanning many chunks
# (gzip+shuffle with partial edge chunks, enough chunks for both ways of locating them, several
# slabs; unfiltered chunks; bfloat16 codes, also of 2^21+ elements; a chunk never written; contiguous data of several
# read pieces; chunks of whole rows, placed straight in the tensor) are inspected with --threads
# 1, 2, 3, 4 and 8 and OMP_NUM_THREADS=3, in --json and
# --csv, with a tensor-scaled and a block-scaled recipe; every output must equal --threads 1's.
# Usage: bash threads_identical.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY=$REPO/.venv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
"$PY" - "$T/d.h5" <<'PYEOF' || { echo "FAIL: h5py from requirements.txt is needed"; exit 1; }
import sys, h5py, numpy as np
rng = np.random.default_rng(22)
def act(shape):
    return (rng.standard_normal(shape, dtype=np.float32) * np.exp(rng.standard_normal((shape[0], 1), dtype=np.float32) * 3)).astype(np.float32)
with h5py.File(sys.argv[1], "w") as f:
    # 450 chunks (addresses listed, pread by the workers), two slabs of rows, edge chunks.
    f.create_dataset("gz/output", data=act((4500, 1000)), chunks=(50, 200), compression="gzip", compression_opts=1, shuffle=True)
    # 1,800 chunks: more than the reader lists addresses for (read by the reader's thread).
    f.create_dataset("many/output", data=act((1800, 37)), chunks=(1, 37), compression="gzip", shuffle=True)
    f.create_dataset("plain/weight", data=act((500, 100)), chunks=(7, 13))
    b = f.create_dataset("bf16/input", data=(act((300, 256)).view(np.uint32) >> 16).astype(np.uint16), chunks=(16, 64), compression="gzip", shuffle=True)
    b.attrs["dtype"] = "bfloat16"
    # bfloat16 of 2^21+ elements, whose statistics count bit patterns (statistics.cpp, half_stats):
    # gzip chunks and contiguous (mapped).
    big = (act((2200, 1000)).view(np.uint32) >> 16).astype(np.uint16)
    b = f.create_dataset("bigbf16/input", data=big, chunks=(100, 1000), compression="gzip", compression_opts=1, shuffle=True)
    b.attrs["dtype"] = "bfloat16"
    b = f.create_dataset("bigbf16/output", data=big)
    b.attrs["dtype"] = "bfloat16"
    h = f.create_dataset("holes/output", shape=(64, 64), dtype="<f4", chunks=(8, 8), fillvalue=0.5)
    h[0:8, 0:64] = act((8, 64))        # one row of chunks written, the rest never
    f["contig/output"] = act((5000, 1000))  # 20 MB contiguous: two read pieces
    # Chunks of whole rows (read_into places them straight in the tensor, statistics of each
    # piece on the worker that decoded it): gzip with a partial last chunk, unfiltered, 1-D.
    f.create_dataset("rows/output", data=act((1000, 300)), chunks=(64, 300), compression="gzip", shuffle=True)
    f.create_dataset("rows/weight", data=act((700, 90)), chunks=(9, 90))
    f.create_dataset("flat/output", data=act((1, 123457))[0], chunks=(4096,), compression="gzip")
# safetensors: a 20 MB float32 tensor (two read pieces) and a small bfloat16 one.
import json, struct
a, b = act((5000, 1000)), (act((64, 64)).view(np.uint32) >> 16).astype("<u2")
head = {"big.weight": {"dtype": "F32", "shape": list(a.shape), "data_offsets": [0, a.nbytes]},
        "small.weight": {"dtype": "BF16", "shape": list(b.shape), "data_offsets": [a.nbytes, a.nbytes + b.nbytes]}}
h = json.dumps(head).encode()
with open(sys.argv[1][:-3] + ".safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + a.tobytes() + b.tobytes())
PYEOF
n=0
same() { # label, reference file, extra arguments...
    local label=$1 ref=$2; shift 2
    "$FP8KIT" inspect -q "$T/d.h5" "$@" >"$T/out" 2>"$T/err"
    if cmp -s "$T/$ref" "$T/out"; then n=$((n + 1)); else echo "FAIL: $label differs from --threads 1"; diff "$T/$ref" "$T/out" | head -5; fail=1; fi
}
for args in "--json" "--csv" "--recipe mxfp8 --json"; do
    ref=ref$n
    # shellcheck disable=SC2086
    "$FP8KIT" inspect -q "$T/d.h5" $args --threads 1 >"$T/$ref" 2>"$T/err"
    rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$T/$ref" ]; then echo "FAIL: $args --threads 1: exit $rc: $(cat "$T/err")"; fail=1; continue; fi
    # shellcheck disable=SC2086
    same "$args --threads 3" $ref $args --threads 3
    [ "$args" = "--csv" ] && same "--csv --threads 2" $ref --csv --threads 2 && same "--csv --threads 4" $ref --csv --threads 4
    if [ "$args" = "--json" ]; then
        same "--json --threads 2" $ref --json --threads 2
        same "--json --threads 4" $ref --json --threads 4
        same "--json --threads 8" $ref --json --threads 8
        OMP_NUM_THREADS=3 same "--json with OMP_NUM_THREADS=3" $ref --json
    fi
done
"$FP8KIT" inspect -q "$T/d.safetensors" --json --threads 1 >"$T/st1" 2>"$T/err" || { echo "FAIL: safetensors: $(cat "$T/err")"; fail=1; }
"$FP8KIT" inspect -q "$T/d.safetensors" --json --threads 3 >"$T/st3" 2>"$T/err"
if [ -s "$T/st1" ] && cmp -s "$T/st1" "$T/st3"; then n=$((n + 1)); else echo "FAIL: safetensors --threads 3 differs from --threads 1"; fail=1; fi
grep -q '"name": "holes/output"' "$T/ref0" || { echo "FAIL: holes/output missing"; fail=1; }
[ $fail -eq 0 ] && echo "ok: $n outputs identical to --threads 1's (json and csv, two recipes)"
# A bad thread count is a usage error.
"$FP8KIT" inspect -q "$T/d.h5" --threads 0 >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --threads 0 exits $rc (want 2)"; fail=1; }
exit $fail
