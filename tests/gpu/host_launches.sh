#!/usr/bin/env bash
# Every kernel the host code of fp8kit::cuda launches was compiled for the device (no GPU needed).
# nvcc's front end writes, for each __global__ template, a host stub with a real launch
# (__cudaLaunchKernel) for every instantiation the device pass compiled, and a primary template
# whose body is `cudaLaunchKernel(0, 0, 0, 0, 0, 0)` for any other one. A host instantiation the
# device pass never made (its template arguments spelled differently on the host, e.g. a reference
# type from decltype in a nested lambda) therefore compiles, links, and fails only at run time on a
# GPU with "invalid device function". This test fails on any object of the library that calls
# cudaLaunchKernel itself, naming the functions that do.
# Usage: bash host_launches.sh libfp8kit_cuda.a
set -u
LIB=$1
command -v objdump >/dev/null || { echo "skipped: objdump (binutils) is missing"; exit 77; }
[ -f "$LIB" ] || { echo "FAIL: no library at $LIB"; exit 1; }
dis=$(objdump -d -r -C --no-show-raw-insn "$LIB") || { echo "FAIL: objdump could not read $LIB"; exit 1; }
calls=$(printf '%s\n' "$dis" | grep -cE 'R_X86_64_PLT32[[:space:]]+cudaLaunchKernel-')
stubs=$(printf '%s\n' "$dis" | grep -cE 'R_X86_64_PLT32[[:space:]]+__cudaLaunchKernel-')
if [ "$stubs" -eq 0 ]; then
    echo "FAIL: no kernel stub found in $LIB (objdump output not as expected)"
    exit 1
fi
if [ "$calls" -ne 0 ]; then
    echo "FAIL: $calls host launches of kernels with no device code in $LIB, in:"
    printf '%s\n' "$dis" | awk '/^[0-9a-f]+ <.*>:$/ {f = $0} /R_X86_64_PLT32[[:space:]]+cudaLaunchKernel-/ {print "  " f}' |
        sort -u | cut -c1-300 | head -20
    exit 1
fi
echo "ok: $stubs kernel launches through device stubs, none without device code"
