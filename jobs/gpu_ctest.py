#!/usr/bin/env python3
"""gpu_ctest.py BUILD_DIR OUT_DIR [-R REGEX] [--gpus N] [--timeout S]: the tests labelled gpu, several at
once on a machine with several GPUs, each on GPUs of its own.

ctest runs the gpu tests one after the other (they share one RESOURCE_LOCK: two of them on one device
would contend, see tests/CMakeLists.txt). Here each test gets the GPUs it needs (its PROCESSORS, one a
rank; all the machine has when it asks for more) through CUDA_VISIBLE_DEVICES, and tests whose GPUs do
not overlap run at the same time, the ones needing most GPUs first. Each test runs through ctest itself
(`ctest -R ^NAME$`, so its environment, timeout and skip code are the build's). Writes OUT_DIR/NAME.log
per test and OUT_DIR/summary.txt (status, seconds and GPUs a test, then ctest's closing lines); prints
the summary; exits 1 when a test failed, 0 otherwise (a skipped test is not a failure). --gpus (default: `nvidia-smi -L`) says how many
GPUs there are, e.g. to try the scheduling on a machine without one (the tests then skip).
"""
import argparse
import json
import os
import re
import subprocess
import threading
import time


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))


def gpu_tests(build, regex):
    cmd = ["ctest", "--test-dir", build, "--show-only=json-v1", "-L", "gpu"] + (["-R", regex] if regex else [])
    listing = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    tests = []
    for t in listing["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests.append((t["name"], int(props.get("PROCESSORS", 1))))
    return tests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("out")
    ap.add_argument("-R", dest="regex", default="")
    ap.add_argument("--gpus", type=int, default=None)
    ap.add_argument("--timeout", type=int, default=900, help="seconds a test may take (ctest --timeout)")
    a = ap.parse_args()
    ngpu = a.gpus if a.gpus is not None else gpu_count()
    slots = max(ngpu, 1)  # without a GPU the tests still run (and skip), one at a time
    os.makedirs(a.out, exist_ok=True)
    queue = sorted(gpu_tests(a.build, a.regex), key=lambda t: -t[1])
    free = list(range(slots))
    lock = threading.Condition()
    results = {}

    def run(name, ids):
        env = dict(os.environ)
        if ngpu > 0:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)
        t0 = time.time()
        with open(os.path.join(a.out, name + ".log"), "w") as log:
            log.write(f"# {name} on GPUs {env.get('CUDA_VISIBLE_DEVICES', '(none)')}\n")
            log.flush()
            rc = subprocess.run(["ctest", "--test-dir", a.build, "-R", "^" + re.escape(name) + "$",
                                 "--output-on-failure", "--timeout", str(a.timeout)],
                                stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
        text = open(os.path.join(a.out, name + ".log")).read()
        status = "failed" if rc != 0 else "skipped" if "Skipped" in text or "Not Run" in text else "passed"
        with lock:
            results[name] = (status, time.time() - t0, ids)
            free.extend(ids)
            lock.notify_all()

    threads = []
    t_start = time.time()
    for name, want in queue:
        need = min(max(want, 1), slots)
        with lock:
            while len(free) < need:
                lock.wait()
            ids = sorted(free)[:need]
            for i in ids:
                free.remove(i)
        th = threading.Thread(target=run, args=(name, ids))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    wall = time.time() - t_start

    lines = [f"# gpu tests of {a.build}: {len(results)} on {ngpu} GPU(s), {wall:.0f} s"]
    for name, _ in queue:
        status, secs, ids = results[name]
        lines.append(f"{status:8} {secs:7.1f} s  GPUs {','.join(map(str, ids)) if ngpu else '-':8} {name}")
    failed = [n for n, _ in queue if results[n][0] == "failed"]
    skipped = [n for n, _ in queue if results[n][0] == "skipped"]
    # ctest's own closing lines, which jobs/record.py reads (a skipped test counted as passed, as ctest does)
    total = len(results)
    lines.append(f"{100 * (total - len(failed)) // max(total, 1)}% tests passed, {len(failed)} tests failed out of {total}")
    lines.append(f"Total Test time (real) = {wall:.2f} sec")
    if skipped:
        lines += ["The following tests did not run:"] + [f"\t{i + 1} - {n} (Skipped)" for i, n in enumerate(skipped)]
    if failed:
        lines += ["The following tests FAILED:"] + [f"\t{i + 1} - {n} (Failed)" for i, n in enumerate(failed)]
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
