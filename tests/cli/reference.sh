#!/usr/bin/env bash
# The reference CLI as a user runs it: formats, encode, decode, table, and bad input.
# Usage: reference.sh /path/to/fp8kit /path/to/repo
set -u
fp8kit=$1 repo=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
T=$tmp; . "$repo/tests/cli/full_device.bash"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_exit() {  # expect_exit CODE CMD...: exit status and, for 2, exactly one line on stderr
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  [ "$got" = "$want" ] || fail "exit $got (want $want): $*"
  if [ "$want" = 2 ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "stderr is not one line: $* -> $(cat "$tmp/err")"
    grep -q "^fp8kit: error: " "$tmp/err" || fail "no error prefix: $*"
  fi
}
contains() { grep -qF -- "$2" "$1" || fail "'$2' not in output of: $3 -> $(head -c 400 "$1")"; }

# formats: limits derived from the traits.
expect_exit 0 "$fp8kit" formats
contains "$tmp/out" "448=0x7e" "formats"
contains "$tmp/out" "57344=0x7b" "formats"
contains "$tmp/out" "0x7d-0x7f,0xfd-0xff" "formats"
expect_exit 0 "$fp8kit" formats --json
contains "$tmp/out" '"max_finite": 240.0' "formats --json"

# encode: the famous tie, the neighbours, the policy line.
expect_exit 0 "$fp8kit" encode 464 --to e4m3 --profile cuda-satfinite
contains "$tmp/out" "e4m3 0x7e [0 1111 110] normal = 448" "encode 464"
contains "$tmp/out" "below 0x7e = 448" "encode 464"
contains "$tmp/out" "profile cuda-satfinite: nearest-even, saturate-all, NaN signed-quiet-payload" "encode 464 (from binary64)"
expect_exit 0 "$fp8kit" encode nan --from f32 --to e5m2 --profile cuda-satfinite
contains "$tmp/out" "profile cuda-satfinite: nearest-even, saturate-all, NaN canonical" "encode from float32"
contains "$tmp/out" "e5m2 0x7f" "cuda NaN from float32"
expect_exit 0 "$fp8kit" encode -431.99999999999994 --to e4m3 --profile torch
contains "$tmp/out" "0xfd" "encode from binary64 rounds once"
expect_exit 0 "$fp8kit" encode 0x43e80001 --bits --from f32 --to e4m3 --profile ml_dtypes
contains "$tmp/out" "0x7f" "encode bits past the tie"
expect_exit 0 "$fp8kit" encode 3 --to e8m0 --profile cuda-satfinite --round toward-positive
contains "$tmp/out" "0x81" "e8m0 round up"
expect_exit 0 "$fp8kit" encode 1.0625 --to e4m3 --round toward-zero --overflow saturate-all --nan canonical --json
contains "$tmp/out" '"code": "0x38"' "encode --json"

# decode
expect_exit 0 "$fp8kit" decode 0x7e 0b10000000 255 --from e4m3
contains "$tmp/out" "e4m3 0x7e [0 1111 110] normal = 448" "decode"
contains "$tmp/out" "e4m3 0x80 [1 0000 000] zero = -0" "decode"
contains "$tmp/out" "e4m3 0xff [1 1111 111] nan" "decode"

# table: 16-bit tables equal the libraries' own golden tables; decode tables are 256 values.
expect_exit 0 "$fp8kit" table --from bf16 --to e5m2 --profile ml_dtypes -o "$tmp/t.bin"
cmp -s "$tmp/t.bin" "$repo/tests/golden/bf16_e5m2_ml_dtypes.bin" || fail "table bf16->e5m2 differs from ml_dtypes"
expect_exit 0 "$fp8kit" table --from f16 --to e4m3 --profile cuda-satfinite -o -
cmp -s "$tmp/out" "$repo/tests/golden/f16_e4m3_cuda-satfinite-gpu.bin" || fail "table to stdout differs from the GPU's cvt"
expect_exit 0 "$fp8kit" table --from e4m3 --to f32 -o "$tmp/d.bin"
[ "$(stat -c %s "$tmp/d.bin")" = 1024 ] || fail "decode table size"
[ "$(od -An -tx4 -j $((0x7e * 4)) -N4 "$tmp/d.bin" | tr -d ' ')" = 43e00000 ] || fail "decode table 0x7e != 448.0f"

# bad input: one line, exit 2, no partial output left behind.
expect_exit 2 "$fp8kit" encode 1 --to e9m9 --profile torch
contains "$tmp/err" "unknown format 'e9m9'" "unknown format"
expect_exit 2 "$fp8kit" encode 1 --to e4m3 --profile pytorch
contains "$tmp/err" "unknown profile 'pytorch'" "unknown profile"
expect_exit 2 "$fp8kit" encode 1 --to e4m3 --round up --overflow no-saturate --nan canonical
contains "$tmp/err" "unknown rounding 'up'" "unknown rounding"
expect_exit 2 "$fp8kit" encode 1.2.3 --to e4m3 --profile torch
contains "$tmp/err" "'1.2.3' is not a number" "malformed value"
expect_exit 2 "$fp8kit" encode 1 --to e4m3
contains "$tmp/err" "name the conversion" "missing policy"
expect_exit 2 "$fp8kit" encode 1 --to e8m0 --profile cuda-nosat --round nearest-even
expect_exit 2 "$fp8kit" encode 1 --to e8m0 --profile torch
expect_exit 2 "$fp8kit" decode 256 --from e4m3
expect_exit 2 "$fp8kit" table --from f16 --to e4m3 --profile torch -o /nonexistent/dir/t.bin
contains "$tmp/err" "/nonexistent/dir/t.bin" "unwritable output names the file"
expect_exit 2 "$fp8kit" table --from f16 --to e4m3 --profile torch -o "$FULL"
contains "$tmp/err" "write failed: No space left on device" "a full device is a failure"
expect_exit 2 "$fp8kit" frobnicate

echo "$fails failure(s)"
[ "$fails" = 0 ]
