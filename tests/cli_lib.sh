# cli_lib.sh: what the command-line test scripts share (sourced, not run): a python3 with the modules
# the script needs (cli_py_needs, default "numpy, h5py"; exit 77 without one), a scratch directory,
# pass/fail counting, `expect` and `finish`. Needs: dsolve and mpiexec set by the caller.
py=
for p in python3 /usr/bin/python3; do
    if "$p" -c "import ${cli_py_needs:-numpy, h5py}" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "$(basename "$0"): no python3 with ${cli_py_needs:-numpy, h5py}"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect CODE PATTERN NP ARGS...: exit status CODE, stderr matching PATTERN, and no out.h5 or out.h5.part.
expect() {
    local code=$1 pattern=$2 np=$3
    shift 3
    rm -f out.h5 out.h5.part
    timeout 300 "$mpiexec" -np "$np" "$dsolve" "$@" >stdout.txt 2>stderr.txt
    local rc=$?
    if [ "$rc" -eq 124 ]; then bad "dsolve $* (np $np): hung (killed after 300 s)"; return; fi
    local msg
    msg=$(grep '^dsolve:' stderr.txt | head -1)
    if [ "$rc" -ne "$code" ]; then bad "dsolve $* (np $np): exit $rc, want $code; stderr: $(head -3 stderr.txt)"; return; fi
    if ! grep -q -- "$pattern" <<<"$msg"; then bad "dsolve $* (np $np): message '$msg' lacks '$pattern'"; return; fi
    if [ "$(grep -c '^dsolve:' stderr.txt)" -ne 1 ]; then bad "dsolve $* (np $np): want one error line, got: $(cat stderr.txt)"; return; fi
    if [ -e out.h5 ] || [ -e out.h5.part ]; then bad "dsolve $* (np $np): left an output file"; return; fi
    ok
}

# finish NAME: the verdict line and the exit status.
finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
