"""record.py RESULTS.jsonl --part P --name N ...: appends the record of one jobs/measure.sh run.

  record.py RESULTS.jsonl --part P --name N --rc RC --wall S --command CMD --stdout F --stderr F
      one record per JSON line of the run's stdout (ctest's output: its counts; no JSON: result null)
  record.py RESULTS.jsonl --part P --name N --skipped REASON
      a run not made, and why

A record: part, name, command (as run), np, date, host, commit, dirty, gpus, gpu_model, gpu_mib,
cores (the job's, from the environment jobs/lib.sh exports), rc, ok, wall_seconds, error (a failed
run's message), result (the run's own JSON object) and index (where a run printed several).
jobs/summarize.py reads them. Standard library only."""
import argparse
import datetime
import json
import os
import re

def json_lines(path):
    """The JSON objects of a file's lines that start with '{' (others, and bad lines, are skipped)."""
    found = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        found.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return found


def ctest_counts(path):
    """ctest's verdict from its output: totals, the failed tests and those that did not run."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    m = re.search(r"(\d+)% tests passed(?:, (\d+) tests? failed)? out of (\d+)", text)
    if not m:
        return None
    failed, total = int(m[2] or 0), int(m[3])
    sections = re.split(r"\n(?=The following tests )", text)
    names = {"FAILED": [], "did not run": []}
    for sec in sections[1:]:
        key = "FAILED" if sec.startswith("The following tests FAILED") else "did not run"
        names[key] += re.findall(r"^\s*\d+ - (\S+)", sec, re.M)
    t = re.search(r"Total Test time \(real\) =\s*([\d.]+) sec", text)
    # ctest counts a skipped test (exit 77) as passed; here it is counted apart.
    return {"tests": total, "passed": total - failed - len(names["did not run"]), "failed": failed,
            "skipped": len(names["did not run"]), "failed_tests": names["FAILED"],
            "not_run": names["did not run"], "seconds": float(t[1]) if t else None}


def first_error(path):
    """The line that says why a run failed: dsolve's own message, else stderr's last line."""
    try:
        lines = [l.rstrip() for l in open(path, errors="replace") if l.strip()]
    except OSError:
        return ""
    for l in lines:
        if l.startswith("dsolve") and ":" in l:
            return l[:300]
    return lines[-1][:300] if lines else ""


def job_fields():
    env = os.environ.get
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": env("DS_HOST", ""), "commit": env("DS_COMMIT", "unknown"),
            "dirty": {"true": True, "false": False}.get(env("DS_DIRTY", ""), None),
            "gpus": int(env("DS_GPUS", "0") or 0), "gpu_model": env("DS_GPU_MODEL", ""),
            "gpu_mib": int(env("DS_GPU_MIB", "0") or 0), "cores": int(env("DS_CORES", "0") or 0)}


def cmd_record(a):
    base = {"part": a.part, "name": a.name}
    if a.skipped is not None:
        recs = [dict(base, command=None, **job_fields(), ok=None, skipped=a.skipped)]
    else:
        m = re.search(r"(?:^| )-np (\d+)", a.command or "")
        base.update(command=a.command, np=int(m[1]) if m else None, **job_fields(), rc=a.rc, ok=a.rc == 0,
                    wall_seconds=a.wall)
        if a.rc in (124, 137):
            base["error"] = "stopped at its time limit (DSOLVE_RUN_TIMEOUT or DSOLVE_DEADLINE)"
        elif a.rc != 0:
            base["error"] = first_error(a.stderr) or first_error(a.stdout)
        found = json_lines(a.stdout)
        if not found and a.name == "tests":
            found = [ctest_counts(a.stdout)] if ctest_counts(a.stdout) else []
        recs = [dict(base, result=r, **({"index": i} if len(found) > 1 else {})) for i, r in enumerate(found)]
        recs = recs or [dict(base, result=None)]
    with open(a.results, "a") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("--part", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--skipped")
    p.add_argument("--rc", type=int, default=0)
    p.add_argument("--wall", type=float)
    p.add_argument("--command")
    p.add_argument("--stdout", default="")
    p.add_argument("--stderr", default="")
    cmd_record(p.parse_args())


if __name__ == "__main__":
    main()
