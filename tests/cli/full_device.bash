# Sourced by the tests that write into a full disk; not a test itself (ctest runs tests/cli/*.sh).
# Needs T (the test's own folder); sets FULL to a character device that refuses every write with
# ENOSPC: Linux's "full" device, major 1, minor 7 (Documentation/admin-guide/devices.txt in the
# kernel sources). That is /dev/full where /dev/full is that device. Some sandboxes have no
# /dev/full, or a plain file by that name, into which every write succeeds; there the same device is
# made with mknod in $T. Nothing here writes to a /dev/full that is not the device, so a test
# cannot leave a plain file in /dev. Without either, the test is skipped (exit 77) and says why.
is_full_device() { [ "$(stat -L -c '%F %t %T' "$1" 2>/dev/null)" = "character special file 1 7" ]; }
# ... and one that can be opened here and refuses a write with ENOSPC (a nodev mount refuses the open).
refuses_writes() {
    is_full_device "$1" || return 1
    local said
    said=$( (printf x >"$1") 2>&1)
    [[ $said == *"No space left on device"* ]]
}
if refuses_writes /dev/full; then
    FULL=/dev/full
elif mknod "$T/full_device" c 1 7 2>/dev/null && refuses_writes "$T/full_device"; then
    FULL=$T/full_device
else
    echo "SKIPPED: no full device: /dev/full is not character device 1,7 refusing writes, and none could be made in $T"
    exit 77
fi
