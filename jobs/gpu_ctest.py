#!/usr/bin/env python3
"""gpu_ctest.py BUILD_DIR OUT_DIR [-R REGEX] [-E REGEX] [--gpus N] [--timeout S] [--deadline S]
[--narrow-first] [--memcheck] [--per-gpu K]: the tests
labelled gpu, several at once on a machine with several GPUs, each on GPUs of its own.

ctest runs the gpu tests one after the other (they share one RESOURCE_LOCK: two of them on one device
would contend, see tests/CMakeLists.txt). Here each test gets the GPUs it needs (its PROCESSORS, one a
rank; all the machine has when it asks for more) through CUDA_VISIBLE_DEVICES, and tests whose GPUs do
not overlap run at the same time, the ones needing most GPUs first. Each test runs through ctest itself
(`ctest -R ^NAME$`, so its environment, timeout and skip code are the build's). Writes OUT_DIR/NAME.log
per test and OUT_DIR/summary.txt (status, seconds and GPUs a test, then ctest's closing lines); prints
the summary; --deadline ends the whole run after S seconds (running tests are cut, the rest marked not
run), --narrow-first starts the tests needing fewest GPUs first, --per-gpu K lets up to K tests share a GPU
(each still on distinct GPUs of its own: for --memcheck, whose processes leave the GPUs mostly idle); exits 1 when a test failed, 0 otherwise (a skipped test is not a failure). --gpus (default: `nvidia-smi -L`) says how many
GPUs there are, e.g. to try the scheduling on a machine without one (the tests then skip).

--memcheck runs every test's GPU processes under compute-sanitizer's memcheck (one log a process,
OUT_DIR/NAME.memcheck.PID.log; a report fails the test): the test's command is run as ctest would run
it (its ENVIRONMENT, SKIP_RETURN_CODE), with the sanitizer put before the test program in each rank
of an mpiexec line, and dsolve replaced by a wrapper that starts it under the sanitizer in the
command-line tests (`dsolve gen` runs no GPU code and is run as it is). The checkpoint tests signal
dsolve's processes by a command line that starts with a path ending in /dsolve (tests/cli_lib.sh), which
the sanitized dsolve's is.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU"))


def gpu_tests(build, regex, exclude):
    cmd = ["ctest", "--test-dir", build, "--show-only=json-v1", "-L", "gpu"]
    cmd += (["-R", regex] if regex else []) + (["-E", exclude] if exclude else [])
    listing = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    tests = []
    for t in listing["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests.append((t["name"], int(props.get("PROCESSORS", 1)), t["command"], props))
    return tests


def memcheck_command(cmd, build, sanitizer, wrapper):
    """The test's command with its GPU processes under the sanitizer (see --memcheck)."""
    dsolve = os.path.join(os.path.abspath(build), "dsolve")
    out = [wrapper if c == dsolve else c for c in cmd]
    if os.path.basename(out[0]).startswith(("mpiexec", "mpirun")):
        tests_dir = os.path.join(os.path.abspath(build), "tests") + os.sep
        k = next((i for i, c in enumerate(out) if c.startswith(tests_dir)), None)
        if k is not None:
            out[k:k] = sanitizer
    return out


def error_summaries(out, name=""):
    """The closing lines ("ERROR SUMMARY: ...", what follows the colon) of the sanitized processes' logs in
    OUT, of test NAME's alone when given."""
    for fn in sorted(os.listdir(out)):
        if ".memcheck." in fn and fn.startswith(name + ".memcheck." if name else ""):
            for line in open(os.path.join(out, fn), errors="replace"):
                if "ERROR SUMMARY:" in line:
                    yield line.split("ERROR SUMMARY:", 1)[1].strip()


def memcheck_errors(out, name):
    """Whether a sanitized process of test NAME reported an error (a test may pass whatever a run's status)."""
    return any(not k.startswith("0 errors") for k in error_summaries(out, name))


def write_wrapper(path, build, sanitizer, log):
    """dsolve under the sanitizer, its log at LOG (the wrapper's process id in place of %p). `dsolve gen` and
    runs on the CPU backend start no GPU code and run as they are. A run that ends before CUDA starts (a
    usage error, bad input found first) leaves the sanitizer without dsolve's exit status (it says
    "terminated before first instrumented API call"): that run is made again without it, for its status."""
    dsolve = os.path.join(os.path.abspath(build), "dsolve")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
        f.write(f'[ "$1" = gen ] && exec {dsolve} "$@"\n')
        f.write(f'case " $* " in *" --backend cpu "* | *" --backend=cpu "*) exec {dsolve} "$@" ;; esac\n')
        f.write(f'log="{log.replace("%p", "$$")}"\n')
        f.write(f'{" ".join(sanitizer)} --log-file "$log" {dsolve} "$@"\n')
        f.write("rc=$?\n")
        f.write('if grep -q "terminated before first instrumented API call" "$log" 2>/dev/null; then\n')
        f.write(f'    {dsolve} "$@" >/dev/null 2>&1 </dev/null\n')
        f.write("    rc=$?\nfi\nexit $rc\n")
    os.chmod(path, 0o755)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("out")
    ap.add_argument("-R", dest="regex", default="")
    ap.add_argument("-E", dest="exclude", default="")
    ap.add_argument("--deadline", type=int, default=0, help="seconds for the whole run (0: none)")
    ap.add_argument("--narrow-first", action="store_true", help="the tests needing fewest GPUs first")
    ap.add_argument("--memcheck", action="store_true", help="under compute-sanitizer memcheck")
    ap.add_argument("--gpus", type=int, default=None)
    ap.add_argument("--per-gpu", type=int, default=1, help="tests that may share a GPU at once")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a test may take (ctest --timeout)")
    a = ap.parse_args()
    ngpu = a.gpus if a.gpus is not None else gpu_count()
    slots = max(ngpu, 1)  # without a GPU the tests still run (and skip), one at a time
    os.makedirs(a.out, exist_ok=True)
    queue = sorted(gpu_tests(a.build, a.regex, a.exclude), key=lambda t: t[1] if a.narrow_first else -t[1])
    t_end = time.time() + a.deadline if a.deadline > 0 else None

    def time_left():
        return a.timeout if t_end is None else max(1, min(a.timeout, int(t_end - time.time())))
    free = [i for i in range(slots) for _ in range(max(a.per_gpu, 1))]  # a GPU once per test it may take
    lock = threading.Condition()
    results = {}

    def memcheck_log(name):
        return os.path.join(os.path.abspath(a.out), name + ".memcheck.%p.log")

    def sanitizer():
        cs = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        # API errors are not reported: NCCL's communicator set-up asks cudaFuncGetAttributes about kernels
        # not built for the device and handles the refusal (4 reports a communicator), and dsolve checks
        # every call's status itself.
        return [cs, "--tool", "memcheck", "--error-exitcode", "9", "--print-limit", "20", "--report-api-errors",
                "no"]

    def run(name, ids, cmd, props):
        env = dict(os.environ)
        if ngpu > 0:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)
        t0 = time.time()
        with open(os.path.join(a.out, name + ".log"), "w") as log:
            log.write(f"# {name} on GPUs {env.get('CUDA_VISIBLE_DEVICES', '(none)')}\n")
            log.flush()
            if a.memcheck:
                wrapper = os.path.join(os.path.abspath(a.out), name + ".dsolve")
                write_wrapper(wrapper, a.build, sanitizer(), memcheck_log(name))
                run_cmd = memcheck_command(cmd, a.build, sanitizer() + ["--log-file", memcheck_log(name)], wrapper)
                env.update(kv.split("=", 1) for kv in props.get("ENVIRONMENT", []) if "=" in kv)
                env["DSOLVE_TEST_TIME_SCALE"] = "10"  # the command-line tests' limits per run (tests/cli_lib.sh)
                log.write("# " + " ".join(run_cmd) + "\n")
                log.flush()
            else:
                run_cmd = ["ctest", "--test-dir", a.build, "-R", "^" + re.escape(name) + "$",
                           "--output-on-failure", "--timeout", str(time_left())]
            # a test's own TIMEOUT overrides ctest's --timeout: the deadline is kept here
            proc = subprocess.Popen(run_cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                rc = proc.wait(timeout=time_left())
            except subprocess.TimeoutExpired:  # the whole process group: ctest or mpiexec, ranks, sanitizers
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = -1
                log.write(f"\n# cut after {time.time() - t0:.0f} s\n")
            skip = a.memcheck and rc == int(props.get("SKIP_RETURN_CODE", -2))
        text = open(os.path.join(a.out, name + ".log")).read()
        if rc == -1:
            status = "cut"
        elif a.memcheck:
            status = "skipped" if skip else "failed" if rc != 0 or memcheck_errors(a.out, name) else "passed"
        else:
            status = "failed" if rc != 0 else "skipped" if "Skipped" in text or "Not Run" in text else "passed"
        with lock:
            results[name] = (status, time.time() - t0, ids)
            free.extend(ids)
            lock.notify_all()

    threads = []
    t_start = time.time()
    for name, want, cmd, props in queue:
        need = min(max(want, 1), slots)
        with lock:
            while len(set(free)) < need:
                lock.wait()
            if t_end is not None and time.time() > t_end - 5:
                results[name] = ("not-run", 0.0, [])
                continue
            ids = sorted(set(free), key=lambda i: (-free.count(i), i))[:need]  # the least shared GPUs
            for i in ids:
                free.remove(i)
        th = threading.Thread(target=run, args=(name, ids, cmd, props))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    wall = time.time() - t_start

    lines = [f"# gpu tests of {a.build}: {len(results)} on {ngpu} GPU(s), {wall:.0f} s"]
    for name, *_ in queue:
        status, secs, ids = results[name]
        lines.append(f"{status:8} {secs:7.1f} s  GPUs {','.join(map(str, ids)) if ngpu else '-':8} {name}")
    failed = [n for n, *_ in queue if results[n][0] in ("failed", "cut")]
    skipped = [n for n, *_ in queue if results[n][0] == "skipped"]
    # ctest's own closing lines, which jobs/record.py reads (a skipped test counted as passed, as ctest does)
    not_run = [n for n, *_ in queue if results[n][0] == "not-run"]
    total = len(results) - len(not_run)
    lines.append(f"{100 * (total - len(failed)) // max(total, 1)}% tests passed, {len(failed)} tests failed out of {total}")
    lines.append(f"Total Test time (real) = {wall:.2f} sec")
    if skipped:
        lines += ["The following tests did not run:"] + [f"\t{i + 1} - {n} (Skipped)" for i, n in enumerate(skipped)]
    if not_run:
        lines.append(f"Not started before the deadline ({a.deadline} s): " + " ".join(not_run))
    if failed:
        lines += ["The following tests FAILED:"] + [f"\t{i + 1} - {n} (Failed)" for i, n in enumerate(failed)]
    if a.memcheck:  # every sanitized process's closing line, counted
        tally = {}
        for key in error_summaries(a.out):
            tally[key] = tally.get(key, 0) + 1
        lines.append("memcheck: " + (", ".join(f"{n} processes with {k}" for k, n in sorted(tally.items()))
                                     or "no process reported"))
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
