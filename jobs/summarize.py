"""summarize.py OUT_DIR: the table of a gpu-check.sh run: each dsolve JSON (time, residual, rate against
the measured ceilings) and the peer's times with the ratios taken in the same job."""
import glob, json, os, sys

out = sys.argv[1]
DGEMM, COPY = 64.8e12, 4.27e12  # H200 ceilings measured on our machines (shared/DEVICE.md)

def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except Exception:
        return None

runs = {os.path.basename(p)[:-5]: load(p) for p in sorted(glob.glob(os.path.join(out, "*.json")))}
print(f"{'run':28} {'ranks':>5} {'method':>8} {'batch':>5} {'sweeps':>6} {'solve ms':>10} {'setup ms':>9} "
      f"{'rel resid':>10} {'GB/s':>8} {'setup %DGEMM':>12}")
for name, j in runs.items():
    if not j or name.startswith("peer") or name == "file_gen":
        continue
    flops = j["rows"] * j["cols"] ** 2  # SYRK of the Gram route (per run, all ranks)
    dg = flops / j["ranks"] / j["setup_seconds"] / DGEMM * 100 if j["method"] == "gram" else float("nan")
    print(f"{name:28} {j['ranks']:5d} {j['method']:>8} {j['batch']:5d} {j['sweeps']:6d} {j['solve_seconds']*1e3:10.3f} "
          f"{j['setup_seconds']*1e3:9.3f} {j['rel_residual']:10.2e} {j['gbps']:8.1f} {dg:12.1f}")

def ratio(peer, ours):
    p, o = runs.get(peer), runs.get(ours)
    if p and o:
        print(f"{ours:28} {o['solve_seconds']*1e3:10.3f} ms   peer {peer:14} {p['seconds']*1e3:10.1f} ms   "
              f"speedup {p['seconds']/o['solve_seconds']:8.1f}x  (peer rel residual {p['rel_residual']:.2e})")

print()
ratio("peer_b100", "seed_b100_auto")
ratio("peer_b100", "seed_b100_residual")
ratio("peer_b1", "seed_b1_gram")
ratio("peer_b1", "seed_b1_residual")
print()
for a, b, what in [("strong4m_np1", "strong4m_np4", "strong scaling 4M x 1000, 4 GPUs vs 1"),
                   ("strong4m_np1", "strong4m_np2", "strong scaling 4M x 1000, 2 GPUs vs 1"),
                   ("strong4m_residual_np1", "strong4m_residual_np4", "strong scaling 4M x 1000 residual route, 4 vs 1")]:
    if runs.get(a) and runs.get(b):
        print(f"{what}: {runs[a]['solve_seconds']/runs[b]['solve_seconds']:.2f}x")
f = runs.get("file_solve_np4")
if f:
    print(f"from HDF5, 1M x 1000 on 4 GPUs: solve {f['solve_seconds']*1e3:.1f} ms, total with I/O {f['total_seconds']:.2f} s, "
          f"coef error {f['coef_error']:.2e}")
g = runs.get("file_gen")
if g:
    print(f"gen 1M x 1000 (8 GB) with 4 ranks: {g['seconds']:.2f} s")
w1, w4 = runs.get("weak10m_np1"), runs.get("weak40m_np4")
if w1 and w4:
    r1 = w1["rows"] / w1["solve_seconds"]; r4 = w4["rows"] / 4 / w4["solve_seconds"]
    print(f"weak scaling 10M x 1000 per GPU: per-GPU rate at 4 GPUs = {r4/r1*100:.1f}% of 1 GPU")
