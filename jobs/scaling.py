"""scaling.py OUT_DIR: the table of a jobs/gpu-scaling.sh run. For each command and mode, the time on
1, 2, 4 and 8 GPUs (solve_seconds for solve, seconds for ann and sort: training or sorting, without
I/O), and against one GPU: the speedup t1/tP for strong runs (same problem), the per-GPU efficiency
t1/tP for weak runs (P times the problem on P GPUs). Also writes OUT_DIR/scaling.json."""
import glob, json, os, re, sys

out = sys.argv[1]
KEY = {"solve": "solve_seconds", "ann": "seconds", "sort": "seconds"}
SIZE = {"solve": lambda j: f"{j['rows']:,} x {j['cols']}",
        "ann": lambda j: f"{j['rows']:,} x {j['cols']}, {j['neurons']} neurons",
        "sort": lambda j: f"{j['keys']:,} {j['dtype']}"}
CHECK = {"solve": lambda j: f"rel residual {j['rel_residual']:.1e}",
         "ann": lambda j: f"test r {j['test_r']:.7f}",
         "sort": lambda j: f"verified {j['verified']}, imbalance {j['imbalance']:.4f}"}

runs = {}
for path in sorted(glob.glob(os.path.join(out, "*_np*.json"))):
    m = re.fullmatch(r"(solve|ann|sort)_(strong|weak)_np(\d+)\.json", os.path.basename(path))
    if not m:
        continue
    try:
        with open(path) as f:
            j = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        continue
    runs.setdefault((m[1], m[2]), {})[int(m[3])] = j

table = []
print(f"{'command':6} {'mode':6} {'GPUs':>4} {'problem':34} {'seconds':>10} {'vs 1 GPU':>16}  check")
for (cmd, mode), by_np in sorted(runs.items()):
    t1 = by_np[1][KEY[cmd]] if 1 in by_np else None
    for np_, j in sorted(by_np.items()):
        t = j[KEY[cmd]]
        rel = t1 / t if t1 else float("nan")
        what = f"{rel:.2f}x speedup" if mode == "strong" else f"{100 * rel:.1f} % a GPU"
        print(f"{cmd:6} {mode:6} {np_:4d} {SIZE[cmd](j):34} {t:10.4f} {what:>16}  {CHECK[cmd](j)}")
        table.append({"command": cmd, "mode": mode, "gpus": np_, "seconds": t,
                      "speedup" if mode == "strong" else "efficiency": rel})
with open(os.path.join(out, "scaling.json"), "w") as f:
    json.dump(table, f, indent=1)
