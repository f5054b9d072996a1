# Sourced by the cli scripts that write .npy files with printf (no Python); not a test itself
# (ctest runs tests/cli/*.sh).
# npy FILE DESCR SHAPE DATA(printf escapes) [fortran]: a version 1.0 header padded to 64 bytes.
npy() {
    local order=${5:-False}
    local dict="{'descr': '$2', 'fortran_order': $order, 'shape': $3, }"
    local n=$(( ${#dict} + 1 ))
    local pad=$(( (64 - (10 + n) % 64) % 64 ))
    local len=$(( n + pad ))
    {
        printf '\x93NUMPY\x01\x00'
        printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8)))"
        printf '%s' "$dict"
        printf "%${pad}s" ''
        printf '\n'
        printf "$4"
    } > "$1"
}
