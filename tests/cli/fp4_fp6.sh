#!/usr/bin/env bash
# FP4, FP6 and the other ml_dtypes types through the CLI: every tool takes their names, `table`
# equals ml_dtypes on every float16 and bfloat16 input (the committed golden tables, made by
# ml_dtypes itself), codes past a format's width are refused.
# Usage: fp4_fp6.sh /path/to/fp8kit /path/to/repo
set -u
fp8kit=$1 repo=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_exit() {  # expect_exit CODE CMD...: exit status and, for 2, exactly one line on stderr
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  [ "$got" = "$want" ] || fail "exit $got (want $want): $* -> $(head -c 300 "$tmp/err")"
  if [ "$want" = 2 ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "stderr is not one line: $* -> $(cat "$tmp/err")"
    grep -q "^fp8kit: error: " "$tmp/err" || fail "no error prefix: $*"
  fi
}
contains() { grep -qF -- "$2" "$1" || fail "'$2' not in output of: $3 -> $(head -c 400 "$1")"; }

# table == ml_dtypes, byte for byte, on all 65,536 float16 and bfloat16 inputs.
for fmt in e2m1 e2m3 e3m2 e3m4 e4m3b11fnuz e4m3ieee; do
  for src in f16 bf16; do
    expect_exit 0 "$fp8kit" table --from $src --to $fmt --profile ml_dtypes -o "$tmp/t.bin"
    cmp -s "$tmp/t.bin" "$repo/tests/golden/${src}_${fmt}_ml_dtypes.bin" || fail "table $src -> $fmt != ml_dtypes"
  done
  expect_exit 0 "$fp8kit" formats
  contains "$tmp/out" "$fmt" "formats"
done
# Decode tables have 2^bits entries.
expect_exit 0 "$fp8kit" table --from e2m1 --to f32 -o "$tmp/d.bin"
[ "$(stat -c %s "$tmp/d.bin")" = 64 ] || fail "e2m1 decode table is not 16 float32 values"
expect_exit 0 "$fp8kit" table --from e3m2 --to f16 -o "$tmp/d.bin"
[ "$(stat -c %s "$tmp/d.bin")" = 128 ] || fail "e3m2 decode table is not 64 float16 values"

# formats: limits of the new formats.
expect_exit 0 "$fp8kit" formats --json
contains "$tmp/out" '"max_finite": 6.0' "formats --json (e2m1)"
contains "$tmp/out" '"max_finite": 28.0' "formats --json (e3m2)"
contains "$tmp/out" '"max_finite": 30.0' "formats --json (e4m3b11fnuz)"
contains "$tmp/out" '"code_count": 16' "formats --json"

# encode / decode, both library profiles, and their NaN rules.
expect_exit 0 "$fp8kit" encode 5 --to e2m1 --profile ml_dtypes
contains "$tmp/out" "e2m1 0x06 [0 11 0] normal = 4" "encode 5 (tie to even)"
expect_exit 0 "$fp8kit" encode nan --from f32 --to e2m1 --profile ml_dtypes
contains "$tmp/out" "e2m1 0x08 [1 00 0] zero = -0" "ml_dtypes NaN -> -0"
expect_exit 0 "$fp8kit" encode nan --from f32 --to e2m1 --profile cuda-satfinite
contains "$tmp/out" "e2m1 0x07 [0 11 1] normal = 6" "cuda_fp4.h NaN -> +max"
expect_exit 0 "$fp8kit" encode 1e9 --to e3m2 --profile ml_dtypes
contains "$tmp/out" "e3m2 0x1f" "overflow saturates"
expect_exit 0 "$fp8kit" encode 16 --to e3m4 --profile ml_dtypes
contains "$tmp/out" "inf" "e3m4 overflow -> Inf"
expect_exit 2 "$fp8kit" decode 0xf 0x3f --from e2m1  # 0x3f is no e2m1 code
expect_exit 2 "$fp8kit" decode 0x10 --from e2m1
expect_exit 2 "$fp8kit" decode 0x40 --from e2m3
expect_exit 0 "$fp8kit" decode 0x3f --from e2m3
contains "$tmp/out" "= -7.5" "decode e2m3 0x3f"
expect_exit 2 "$fp8kit" encode 1 --to e2m1 --profile cuda-nosat
expect_exit 2 "$fp8kit" encode 1 --to e3m4 --profile torch

# The analysis tools take the new names.
expect_exit 0 "$fp8kit" inspect "$repo/data/example/llama_tiny_dump.h5" --format e2m1 --csv
contains "$tmp/out" ",e2m1,overflow," "inspect --format e2m1"
expect_exit 0 "$fp8kit" replay "$repo/data/example/amax_trace.csv" --recipe te-delayed --format e3m2 --csv
contains "$tmp/out" "step,tensor,amax,scale" "replay --format e3m2"

echo "$fails failure(s)"
[ "$fails" = 0 ]
