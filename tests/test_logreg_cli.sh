#!/usr/bin/env bash
# test_logreg_cli.sh: `dsolve logreg` as a user meets it. Usage: test_logreg_cli.sh DSOLVE MPIEXEC [fashion]
#   without "fashion": small IDX sets written here (python3's standard library only): the --json keys,
#     a --samples sweep, --plot, the same weights (bits) on 1, 2 and 3 ranks for softmax and ovr, L-BFGS
#     and gd, and bad inputs (missing, bad magic, truncated, corrupt gzip, labels out
#     of range, count mismatch, bad options), each with its exit code and one message line, at np 1 and 2;
#   with "fashion": the CPU path on the installed Fashion-MNIST must reach test accuracy >= 0.84
#     (77 when /usr/share/datasets/fashion-mnist is absent).
set -u
dsolve=$(realpath "$1")
mpiexec=${2:-mpirun}
mode=${3:-cli}
cli_py_needs="json, gzip"
source "$(dirname "$(realpath "$0")")/cli_lib.sh"

if [ "$mode" = fashion ]; then
    [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "no Fashion-MNIST: skipped"; exit 77; }
    timeout 600 "$mpiexec" -np 2 "$dsolve" logreg --backend cpu --json >out.json 2>err.txt || { cat err.txt; exit 1; }
    "$py" - <<'PY' || exit 1
import json
r = json.load(open("out.json"))
print("fashion-mnist (cpu, 2 ranks): test accuracy %.4f, train %.4f, %d iterations, %.2f s" %
      (r["test_accuracy"], r["train_accuracy"], r["iterations"], r["seconds"]))
assert r["test_accuracy"] >= 0.84, "test accuracy below 0.84"
assert r["samples"] == 60000 and r["features"] == 784
PY
    exit 0
fi

"$py" - <<'PY'
import gzip, os, random, struct
random.seed(3)
def idx(ndims, dims, data):
    return bytes([0, 0, 8, ndims]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
def write(d, name, blob, gz=True):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name + (".gz" if gz else ""))
    open(path, "wb").write(gzip.compress(blob) if gz else blob)
def make(d, n, nt, labels=None, gz=True, tweak=None):
    for split, m in (("train", n), ("t10k", nt)):
        lab = [random.randrange(10) for _ in range(m)] if labels is None else labels[:m]
        img = [min(255, 20 * l + random.randrange(60)) for l in lab for _ in range(16)]
        im, lb = idx(3, (m, 4, 4), img), idx(1, (m,), lab)
        if tweak and split == "train":
            im, lb = tweak(im, lb)
        write(d, split + "-images-idx3-ubyte", im, gz)
        write(d, split + "-labels-idx1-ubyte", lb, gz)
make("good", 300, 80)
os.makedirs("plain")
for f in os.listdir("good"):  # the same set, uncompressed
    open(os.path.join("plain", f[:-3]), "wb").write(gzip.open(os.path.join("good", f)).read())
make("magic", 30, 10, tweak=lambda im, lb: (b"\x08\x03" + im[2:], lb))
make("trunc", 30, 10, tweak=lambda im, lb: (im[:-5], lb))
make("range", 30, 10, tweak=lambda im, lb: (im, lb[:8 + 17] + bytes([12]) + lb[8 + 18:]))
make("count", 30, 10, tweak=lambda im, lb: (im, idx(1, (29,), lb[8:-1])))
make("corrupt", 30, 10)
p = "corrupt/train-images-idx3-ubyte.gz"
b = bytearray(open(p, "rb").read()); b[-8] ^= 0xFF; open(p, "wb").write(bytes(b))
PY

cli_cmd=(logreg)

for np in 1 2; do
    expect 3 "nodir: no such directory" $np --data nodir --backend cpu
    expect 3 "train-images-idx3-ubyte.gz: bad magic number" $np --data magic --backend cpu
    expect 3 "train-images-idx3-ubyte.gz: truncated" $np --data trunc --backend cpu
    expect 3 "train-images-idx3-ubyte.gz: corrupt gzip" $np --data corrupt --backend cpu
    expect 3 "label 12 of item 17 is outside 0 .. 9" $np --data range --backend cpu
    expect 3 "holds 30 images but .* holds 29 labels" $np --data count --backend cpu
    expect 2 "500 samples asked for" $np --data good --samples 60,500 --backend cpu
    expect 3 "nothere.h5: no such file" $np --input nothere.h5 --backend cpu
done
expect 2 "expected 'all'" 1 --data good --samples 6x
expect 2 "--test goes with --input" 1 --data good --test t.h5
expect 2 "" 1 --data good --model tree
expect 3 "outside 0 .. 4" 1 --data good --classes 5 --backend cpu

# A good run: the JSON contract, a sweep, a plot, the same result from 1 and 2 ranks.
for np in 1 2; do
    if "$mpiexec" -np $np "$dsolve" logreg --data good --samples 30,300 --iters 20 --backend cpu --plot loss.svg \
        --json >run$np.json 2>stderr.txt; then ok; else bad "good run np $np: $(cat stderr.txt)"; fi
done
"$mpiexec" -np 1 "$dsolve" logreg --data plain --samples 30,300 --iters 20 --backend cpu --json >plain.json 2>stderr.txt \
    || bad "plain IDX run: $(cat stderr.txt)"
"$py" - <<'PY' && ok || bad "JSON contract (see above)"
import json
a, b, c = (json.load(open(f)) for f in ("run1.json", "run2.json", "plain.json"))
keys = ["train_accuracy", "test_accuracy", "iterations", "seconds", "loss", "optimizer", "model", "samples", "ranks",
        "backend", "loss_history", "sweep_samples", "sweep_test_accuracy", "precision", "l2"]
missing = [k for k in keys if k not in a]
assert not missing, "missing keys %s" % missing
assert a["optimizer"] == "lbfgs" and a["model"] == "softmax" and a["samples"] == 300 and a["ranks"] == 1 and b["ranks"] == 2
assert a["sweep_samples"] == [30, 300] and len(a["loss_history"]) == a["iterations"] + 1
assert a["train_accuracy"] > 0.9 and a["test_accuracy"] > 0.8, (a["train_accuracy"], a["test_accuracy"])
assert a["weights_digest"] == b["weights_digest"] == c["weights_digest"], (a["loss"], b["loss"], c["loss"])
PY
# The same weights, to the bit, on 1, 2 and 3 ranks (19 blocks of 16 rows), for both models and both
# optimisers (test_logreg.c checks every pairing, and precision, through the library).
for mo in "softmax lbfgs" "ovr gd"; do
    read -r m o <<<"$mo"
    digests=""
    for np in 1 2 3; do
        "$mpiexec" -np $np "$dsolve" logreg --data good --model $m --optimizer $o --iters 30 --backend cpu --json \
            >ranks$np.json 2>stderr.txt || bad "$m $o np $np: $(cat stderr.txt)"
        digests+=" $("$py" -c "import json; print(json.load(open('ranks$np.json')).get('weights_digest'))")"
    done
    read -ra d <<<"$digests"
    [ "${d[0]}" = "${d[1]}" ] && [ "${d[0]}" = "${d[2]}" ] && ok || bad "$m $o: weights on 1, 2, 3 ranks:$digests"
done
grep -q "<svg" loss.svg && ok || bad "--plot wrote no SVG"
"$mpiexec" -np 1 "$dsolve" logreg --data good --iters 3 --optimizer gd --backend cpu >summary.txt 2>&1 \
    && grep -q "train acc" summary.txt && ok || bad "summary: $(cat summary.txt)"

finish test_logreg_cli
