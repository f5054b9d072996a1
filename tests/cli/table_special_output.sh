#!/usr/bin/env bash
# fp8kit table -o onto something that is not a regular file (a FIFO here; /dev/null in users'
# timing runs) must write into it, not rename a FILE.partial over it and replace the device.
# Usage: table_special_output.sh /path/to/fp8kit /path/to/repo
set -euo pipefail
fp8kit=$1
repo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkfifo "$tmp/pipe"
cat "$tmp/pipe" > "$tmp/received" &
reader=$!
# The output is opened without blocking (a FIFO with no reader is refused): wait until cat is
# blocked opening the FIFO, from when it counts as its reader.
for _ in $(seq 200); do
    [ "$(cat /proc/$reader/comm 2>/dev/null)" = cat ] && [ "$(cut -d' ' -f1 /proc/$reader/syscall 2>/dev/null)" = 257 ] && break
    sleep 0.05
done
"$fp8kit" table --from f16 --to e4m3 --profile ml_dtypes -o "$tmp/pipe"
wait "$reader"
[ -p "$tmp/pipe" ] || { echo "FAIL: the FIFO was replaced by a $(stat -c %F "$tmp/pipe")"; exit 1; }
[ ! -e "$tmp/pipe.partial" ] || { echo "FAIL: $tmp/pipe.partial was left behind"; exit 1; }
cmp "$tmp/received" "$repo/tests/golden/f16_e4m3_ml_dtypes.bin" || { echo "FAIL: bytes through the FIFO differ from ml_dtypes"; exit 1; }

# A regular file still goes through FILE.partial and appears complete.
"$fp8kit" table --from bf16 --to e5m2 --profile torch -o "$tmp/table.bin"
cmp "$tmp/table.bin" "$repo/tests/golden/bf16_e5m2_torch.bin" || { echo "FAIL: regular file differs from torch"; exit 1; }
[ ! -e "$tmp/table.bin.partial" ] || { echo "FAIL: table.bin.partial left behind"; exit 1; }

# A decode table (1,024 bytes: not a whole O_DIRECT block) to a regular file equals the same
# table through standard output.
"$fp8kit" table --from e4m3 --to f32 -o "$tmp/decode.bin"
"$fp8kit" table --from e4m3 --to f32 -o - > "$tmp/decode_stdout.bin"
[ "$(stat -c %s "$tmp/decode.bin")" = 1024 ] || { echo "FAIL: decode table is $(stat -c %s "$tmp/decode.bin") bytes"; exit 1; }
cmp "$tmp/decode.bin" "$tmp/decode_stdout.bin" || { echo "FAIL: decode table differs between file and stdout"; exit 1; }

# A directory is refused with exit 2.
set +e
"$fp8kit" table --from f16 --to e4m3 --profile ml_dtypes -o "$tmp" 2> "$tmp/err"
rc=$?
set -e
[ "$rc" = 2 ] || { echo "FAIL: -o DIRECTORY exited $rc, expected 2"; exit 1; }
grep -q "is a directory" "$tmp/err" || { echo "FAIL: message was: $(cat "$tmp/err")"; exit 1; }
echo "ok"
