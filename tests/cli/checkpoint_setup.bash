# The set-up every tests/cli/checkpoint*.sh shares, sourced after `set -u`: the binary and the
# repository from the script's arguments, the fixtures' folder $D, a temporary folder $T removed
# at exit, and `check NAME STATUS`, which prints ok or FAIL and remembers a failure in $fail.
FP8KIT=$1
REPO=$2
D=$REPO/data/checkpoints
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
