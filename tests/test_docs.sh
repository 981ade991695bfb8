#!/usr/bin/env bash
# test_docs.sh DSOLVE: the option tables in docs/ are the binary's own. Runs docs/options.sh on a copy
# of the pages and fails (exit 1, printing the diff) where a block differs from
# `dsolve COMMAND --help --markdown`, or where a command of `dsolve --help` has no block.
# The fix is `docs/options.sh build/dsolve`.
set -u
[ $# -ge 1 ] || { echo "usage: test_docs.sh DSOLVE"; exit 2; }
dsolve=$(realpath "$1")
root=$(cd "$(dirname "$(realpath "$0")")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/docs/*.md "$work"/

if ! "$root/docs/options.sh" "$dsolve" "$work" >/dev/null; then
    echo "test_docs: FAILED (docs/options.sh failed, message above)"
    exit 1
fi
fail=0
for page in "$root"/docs/*.md; do
    name=docs/$(basename "$page")
    if ! diff -u --label "$name" --label "$name from $(basename "$dsolve") --help --markdown" \
        "$page" "$work/$(basename "$page")"; then
        fail=$((fail + 1))
    fi
done
blocks=$(grep -c '^<!-- options: dsolve ' "$root"/docs/*.md | awk -F: '{ n += $2 } END { print n }')
if [ "$fail" -ne 0 ]; then
    echo "test_docs: FAILED: $fail page(s) differ from the binary's option tables (run docs/options.sh $1)"
    exit 1
fi
echo "test_docs: $blocks option tables match the binary: OK"
