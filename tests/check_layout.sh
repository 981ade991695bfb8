#!/bin/sh
# check_layout.sh [ROOT]: runs check_layout.py (the layout rules a compiler does not check: see its
# header) over ROOT, the source tree (default: the folder above this one). Exit 1 lists the violations.
here=$(dirname "$0")
command -v python3 >/dev/null 2>&1 || { echo "check_layout: no python3"; exit 1; }
exec python3 "$here/check_layout.py" "$@"
