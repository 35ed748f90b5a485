#!/bin/sh
# The example client job of deploy/docker-compose.yml: a few `tdstore` CLI
# commands against the tdstored at $TDSTORE_ADDR (host:port or unix:///path).
# Also runs outside Docker:
#   TDSTORE_ADDR=127.0.0.1:50051 PATH=build/client:$PATH deploy/example-client.sh
# Exits non-zero at the first failing command, or if the data read back
# differs from the data written.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dict="example-$$"

tdstore server
tdstore create "$dict" --batch-size 4

# A 4-row float32 .npy file, written byte by byte (no Python in the image):
# magic, version 1.0, header length 118 (so data starts at byte 128), the
# header padded with spaces and a newline, then 4 x 2 little-endian float32.
header="{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }"
{
  printf '\223NUMPY\001\000\166\000%s' "$header"
  printf '%*s\n' $((117 - ${#header})) ''
  # 0.0 1.0 2.0 3.0 4.0 5.0 6.0 7.0 as IEEE-754 little-endian words.
  printf '\000\000\000\000\000\000\200\077\000\000\000\100\000\000\100\100'
  printf '\000\000\200\100\000\000\240\100\000\000\300\100\000\000\340\100'
} > "$work/obs.npy"

tdstore put "$dict" obs "$work/obs.npy"
tdstore ls "$dict"
tdstore info "$dict"
tdstore get "$dict" obs -o "$work/back.npy"
# The 32 data bytes must match (the header's spacing may differ).
tail -c 32 "$work/obs.npy" > "$work/obs.data"
tail -c 32 "$work/back.npy" > "$work/back.data"
cmp "$work/obs.data" "$work/back.data"
# Rows 1 and 3 only.
tdstore get "$dict" obs --index '1::2' -o "$work/rows.npy"
tdstore rm "$dict"
echo "example client: wrote, listed and read back $dict/obs: identical"
