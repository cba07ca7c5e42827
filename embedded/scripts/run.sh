#!/usr/bin/env bash
# Run a wisp firmware under QEMU with semihosting; the firmware's exit status
# becomes this script's.
#
#   embedded/scripts/run.sh [--insns FILE] FIRMWARE.elf [ARGS...]
#
# The board follows the file name: *-m4.elf mps2-an386 (Cortex-M4F),
# *-m7.elf mps2-an500 (Cortex-M7), *-m33.elf mps2-an505 (Cortex-M33),
# *-rv64.elf the RISC-V virt board. ARGS reach the firmware as its command
# line (e.g. `-n 50`). --insns FILE loads the instruction-count plugin
# (tools/libinsn.so beside the firmware) and writes its report to FILE:
# "mark I COUNT" each time the firmware calls fw_mark, then "total COUNT".
# QEMU_TIMEOUT (seconds, default 600) bounds the run.
set -u
insns=
if [ "${1:-}" = "--insns" ]; then insns=$2; shift 2; fi
if [ $# -lt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
elf=$1; shift
[ -f "$elf" ] || { echo "run.sh: no such firmware: $elf" >&2; exit 2; }

common=(-nographic -monitor none -serial null -semihosting-config enable=on,target=native)
case "$elf" in
    *-m4.elf)   qemu=(qemu-system-arm -M mps2-an386); nm=arm-none-eabi-nm ;;
    *-m7.elf)   qemu=(qemu-system-arm -M mps2-an500); nm=arm-none-eabi-nm ;;
    *-m33.elf)  qemu=(qemu-system-arm -M mps2-an505); nm=arm-none-eabi-nm ;;
    *-rv64.elf) qemu=(qemu-system-riscv64 -M virt -bios none); nm=riscv64-unknown-elf-nm ;;
    *) echo "run.sh: cannot tell the board from '$elf' (expected a name ending in -m4/-m7/-m33/-rv64.elf)" >&2; exit 2 ;;
esac
command -v "${qemu[0]}" >/dev/null || { echo "run.sh: ${qemu[0]} is not installed" >&2; exit 2; }

plugin=()
if [ -n "$insns" ]; then
    lib=$(dirname "$elf")/tools/libinsn.so
    [ -f "$lib" ] || { echo "run.sh: no instruction-count plugin at $lib (run make embedded)" >&2; exit 2; }
    mark=$("$nm" "$elf" | awk '$3 == "fw_mark" { print "0x" $1 }')
    [ -n "$mark" ] || { echo "run.sh: $elf has no fw_mark symbol" >&2; exit 2; }
    plugin=(-plugin "$lib,mark=$mark" -d plugin -D "$insns")
fi

append=()
[ $# -gt 0 ] && append=(-append "$*")
exec timeout "${QEMU_TIMEOUT:-600}" "${qemu[@]}" "${common[@]}" "${plugin[@]}" -kernel "$elf" "${append[@]}"
