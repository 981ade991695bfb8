"""peer_warm.py [--runs N] SCRIPT ARGS...: runs a peer script (../shared/peers/seed_peers.py,
torch_peers.py) N times (default 2) in this one Python process and prints the JSON lines of the last
run, each with `warm_runs` (the runs before it) and, where there were any, `cold_seconds` (the first
run's `seconds`). The first run pays the imports, CUDA's context, CuPy's kernel compilation and the
libraries' handles, as dsolve's own warm-up does for dsolve; seed_peers.py's ann case has no warm-up
of its own. The inputs are the same in every run (the scripts draw them from a fixed seed)."""
import contextlib
import io
import json
import runpy
import sys


def run_once(script, args):
    """One run of SCRIPT with ARGS as its command line; its JSON lines (other lines pass through)."""
    sys.argv = [script] + args
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(script, run_name="__main__")
    found = []
    for line in buf.getvalue().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
        else:
            print(line, file=sys.stderr)
    return found


def main():
    args = sys.argv[1:]
    runs = 2
    if args[:1] == ["--runs"]:
        runs, args = int(args[1]), args[2:]
    if runs < 1 or not args:
        sys.exit(__doc__.split("\n\n")[0])
    script, script_args = args[0], args[1:]
    cold = run_once(script, script_args)
    last = cold
    for _ in range(runs - 1):
        last = run_once(script, script_args)
    for i, rec in enumerate(last):
        rec["warm_runs"] = runs - 1
        if runs > 1 and i < len(cold) and "seconds" in cold[i]:
            rec["cold_seconds"] = cold[i]["seconds"]
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
