#!/usr/bin/env python3
"""h2d_peer.py: the host-to-device copy rate of this machine's first GPU, the ceiling of a solve streamed
from host memory (docs/solve.md): a BYTES copy from pinned and from pageable host memory, timed with CUDA
events after a warm-up, the median of REPEATS. Prints one JSON object (GB/s, 10^9 bytes a second).
Usage: h2d_peer.py [--bytes 1073741824] [--repeats 10]; needs torch with CUDA."""
import argparse
import json
import statistics

import torch


def rate(src, dst, repeats):
    """Median GB/s of dst.copy_(src) over repeats, after one warm-up copy."""
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return src.numel() / statistics.median(times) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    dst = torch.empty(a.bytes, dtype=torch.uint8, device="cuda")
    pinned = torch.ones(a.bytes, dtype=torch.uint8).pin_memory()
    pageable = torch.ones(a.bytes, dtype=torch.uint8)
    print(json.dumps({"bytes": a.bytes, "repeats": a.repeats, "device": torch.cuda.get_device_name(0),
                      "pinned_gbps": rate(pinned, dst, a.repeats), "pageable_gbps": rate(pageable, dst, a.repeats)}))


if __name__ == "__main__":
    main()
