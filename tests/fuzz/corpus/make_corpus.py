#!/usr/bin/python3
"""make_corpus.py [DIR]: writes the seed corpora of the fuzz harnesses (tests/fuzz) into DIR (default:
this script's folder), one folder per harness: small valid files of each layout and slightly broken ones
(wrong type, rank or length, links, NaN, compression, truncation), a few KB each. Needs numpy and h5py
(/usr/bin/python3). Rerunning it rewrites the seeds (those in the latest file format differ in a few
bytes each time); the inputs that fuzzing found, regress-*, are not made here and stay as they are.
"""
import gzip
import io
import os
import struct
import sys

import h5py
import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(15)


def h5(folder, name, build, libver="earliest", cut=None):
    """An HDF5 file made by build(f) in memory, written to folder/name (its first cut bytes when cut)."""
    buf = io.BytesIO()
    with h5py.File(buf, "w", libver=libver, track_order=False) as f:
        build(f)
    data = buf.getvalue()
    os.makedirs(os.path.join(OUT, folder), exist_ok=True)
    with open(os.path.join(OUT, folder, name), "wb") as out:
        out.write(data[:cut] if cut else data)


def ds(f, name, value, **kw):
    f.create_dataset(name, data=value, track_times=False, **kw)


def lsq_seeds():
    X, y = rng.standard_normal((6, 3)), rng.standard_normal(6)
    h5("h5_lsq", "f64", lambda f: (ds(f, "X", X), ds(f, "y", y)))
    h5("h5_lsq", "f32_latest", lambda f: (ds(f, "X", X.astype("f4")), ds(f, "y", y.astype("f4"))), "latest")
    h5("h5_lsq", "a_true", lambda f: (ds(f, "X", X), ds(f, "y", y), ds(f, "a_true", np.ones(3))))
    h5("h5_lsq", "chunked_gzip", lambda f: (ds(f, "X", X, chunks=(2, 3), compression="gzip", shuffle=True),
                                           ds(f, "y", y, chunks=(4,), fletcher32=True)))
    h5("h5_lsq", "x_only", lambda f: ds(f, "X", X))
    h5("h5_lsq", "rows_differ", lambda f: (ds(f, "X", X), ds(f, "y", y[:5])))
    h5("h5_lsq", "x_int", lambda f: (ds(f, "X", (X * 10).astype("i4")), ds(f, "y", y)))
    h5("h5_lsq", "x_3d", lambda f: (ds(f, "X", X.reshape(3, 2, 3)), ds(f, "y", y)))
    h5("h5_lsq", "y_nan", lambda f: (ds(f, "X", X), ds(f, "y", np.where(np.arange(6) == 4, np.nan, y))))
    h5("h5_lsq", "x_f16", lambda f: (ds(f, "X", X.astype("f2")), ds(f, "y", y)))

    def links(f):
        g = f.create_group("g")
        ds(g, "data", X)
        f["X"] = h5py.SoftLink("/g/data")
        f["y"] = h5py.ExternalLink("other.h5", "/y")
    h5("h5_lsq", "links", links)
    h5("h5_lsq", "x_external_storage", lambda f: (f.create_dataset("X", (6, 3), "f8", external=[("x.raw", 0, 144)]),
                                                 ds(f, "y", y)))
    h5("h5_lsq", "x_group", lambda f: (f.create_group("X"), ds(f, "y", y)))
    h5("h5_lsq", "empty_x", lambda f: (ds(f, "X", np.zeros((0, 3))), ds(f, "y", np.zeros(0))))
    h5("h5_lsq", "truncated", lambda f: (ds(f, "X", X), ds(f, "y", y)), cut=1400)


def labelled_seeds():
    X = rng.standard_normal((6, 3))
    lab = np.arange(6) % 3
    h5("h5_labelled", "i32", lambda f: (ds(f, "X", X), ds(f, "labels", lab.astype("i4"))))
    h5("h5_labelled", "u8_f32_latest", lambda f: (ds(f, "X", X.astype("f4")), ds(f, "labels", lab.astype("u1"))),
       "latest")
    h5("h5_labelled", "i64_big", lambda f: (ds(f, "X", X), ds(f, "labels", np.array([0, 1, 2, 3, 4, 2**40]))))
    h5("h5_labelled", "float_labels", lambda f: (ds(f, "X", X), ds(f, "labels", lab.astype("f8"))))
    h5("h5_labelled", "rows_differ", lambda f: (ds(f, "X", X), ds(f, "labels", lab[:4].astype("i4"))))
    h5("h5_labelled", "chunked", lambda f: (ds(f, "X", X, chunks=(3, 1), compression="gzip"),
                                           ds(f, "labels", lab.astype("i2"), chunks=(2,))))
    h5("h5_labelled", "x_inf", lambda f: (ds(f, "X", np.where(X > 1, np.inf, X)), ds(f, "labels", lab)))
    h5("h5_labelled", "labels_2d", lambda f: (ds(f, "X", X), ds(f, "labels", lab.reshape(6, 1))))


def keys_seeds():
    n = 10
    for t in ("i4", "i8", "u4", "u8", "f4", "f8"):
        h5("h5_keys", "keys_" + t, lambda f: ds(f, "keys", rng.integers(-50, 50, n).astype(t)))
    h5("h5_keys", "keys_values", lambda f: (ds(f, "keys", rng.standard_normal(n)), ds(f, "values", np.arange(n))))
    h5("h5_keys", "values_short", lambda f: (ds(f, "keys", np.arange(n)), ds(f, "values", np.arange(n - 1))))
    h5("h5_keys", "keys_i2", lambda f: ds(f, "keys", np.arange(n, dtype="i2")))
    h5("h5_keys", "keys_2d", lambda f: ds(f, "keys", np.arange(n).reshape(2, 5)))
    h5("h5_keys", "keys_gzip_latest", lambda f: ds(f, "keys", np.arange(64, dtype="u8"), chunks=(16,),
                                                   compression="gzip"), "latest")
    h5("h5_keys", "keys_nan", lambda f: ds(f, "keys", np.array([1.0, np.nan, -np.inf, 3.0])))
    h5("h5_keys", "keys_string", lambda f: ds(f, "keys", np.array([b"a", b"b"])))
    h5("h5_keys", "keys_empty", lambda f: ds(f, "keys", np.zeros(0, "i4")))


def model(f, inputs=3, neurons=4, outputs=2, classes=2, W=None, extra=None):
    ds(f, "W", W if W is not None else rng.standard_normal((neurons, inputs + 1)))
    ds(f, "V", rng.standard_normal((neurons + 1, outputs)))
    a = {"classes": classes, "inputs": inputs, "neurons": neurons, "outputs": outputs, "y_scale": 1.0,
         "y_shift": 0.0, "ridge": 1e-6, "subset": 0, "seed": 7}
    a.update(extra or {})
    for k, v in a.items():
        if v is not None:
            f["V"].attrs[k] = v


def model_seeds():
    h5("h5_model", "valid", model)
    h5("h5_model", "regression_latest", lambda f: model(f, outputs=1, classes=0), "latest")
    h5("h5_model", "attr_string", lambda f: model(f, extra={"classes": "two"}))
    h5("h5_model", "attr_vector", lambda f: model(f, extra={"classes": np.array([2.0, 3.0])}))
    h5("h5_model", "no_classes", lambda f: model(f, extra={"classes": None}))
    h5("h5_model", "w_1d", lambda f: model(f, W=np.ones(4)))
    h5("h5_model", "w_nan", lambda f: model(f, W=np.full((4, 4), np.nan)))
    h5("h5_model", "w_f32_chunked", lambda f: (ds(f, "W", np.ones((4, 4), "f4"), chunks=(2, 2), compression="gzip"),
                                              ds(f, "V", np.ones((5, 1))), f["V"].attrs.create("classes", 0)))


def idx_bytes(ndims, dims, data, type_code=8):
    return bytes([0, 0, type_code, ndims]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def idx_seed(name, flags, payload):
    os.makedirs(os.path.join(OUT, "idx"), exist_ok=True)
    with open(os.path.join(OUT, "idx", name), "wb") as out:
        out.write(bytes([flags]) + payload)


def idx_seeds():
    """Harness input: a flag byte (fuzz_idx.c) and the file, or for a set a 16-bit split and both files."""
    images = idx_bytes(3, (5, 4, 3), range(60))
    labels = idx_bytes(1, (5,), [3, 1, 4, 1, 5])
    idx_seed("labels", 0x00, labels)
    idx_seed("images", 0x01, images)
    idx_seed("images_gz_here_f32_half", 0x1d, images)
    idx_seed("labels_gzip_file", 0x30, gzip.compress(labels, mtime=0))
    idx_seed("images_gzip_file", 0x21, gzip.compress(images, mtime=0))
    idx_seed("set", 0x02, struct.pack(">H", len(images)) + images + labels)
    idx_seed("set_gz", 0x06, struct.pack(">H", len(images)) + images + labels)
    idx_seed("set_count_differs", 0x02, struct.pack(">H", len(images)) + images + idx_bytes(1, (4,), [1, 2, 3, 4]))
    idx_seed("images_truncated", 0x01, images[:-7])
    idx_seed("images_trailing", 0x01, images + b"\x00\x01")
    idx_seed("bad_type", 0x00, idx_bytes(1, (3,), [1, 2, 3], type_code=0x0d))
    idx_seed("gzip_corrupt", 0x00, gzip.compress(labels, mtime=0)[:-6] + b"\xff\xff\x00\x00\x00\x00")
    idx_seed("huge_count", 0x00, idx_bytes(1, (0x7fffffff,), [1, 2, 3]))
    idx_seed("huge_count_gz", 0x04, idx_bytes(1, (0x7fffffff,), [1, 2, 3]))


lsq_seeds()
labelled_seeds()
keys_seeds()
model_seeds()
idx_seeds()
