"""RecordIO read throughput and ImageRecordIter images/s, next to a raw read loop and MXNet 1.9.1.

In one run:

1. Sequential read of a file of mixed-size records (80% 100 B - 4 KiB, 15% 4 - 64 KiB,
   5% 64 KiB - 1 MiB), and of one of image-sized records (16 - 512 KiB), from the page
   cache: a plain ``file.read(8 MiB)`` loop (the limit), mxkit's ``MXRecordIO.read`` and,
   when available, MXNet's ``MXRecordIO.read``. MB/s, best of ``--repeats``.
2. ``ImageRecordIter`` decoding 256x256 JPEGs (quality 90) into 224x224 batches with random
   crop and mirror, at 1 and 2 threads, for mxkit and MXNet. Images/s of a full epoch after
   the first (steady state), best of ``--repeats``.

MXNet runs in a subprocess of the interpreter named by the environment variable
``MXKIT_BENCH_MXNET_PYTHON`` (a Python with ``mxnet`` installed); without it, its columns
are left empty. mxkit's batches are numpy arrays here (``io_batch_type=numpy``).

    MXKIT_BENCH_MXNET_PYTHON=/path/to/mxnet/bin/python python benchmarks/io.py --size-mb 1024

Targets: RecordIO reading at least 0.8x the raw loop and at least MXNet; the image pipeline
at least MXNet's images/s at equal threads. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from mxkit.core.errors import MissingComponentError

MXNET_PYTHON_ENV = "MXKIT_BENCH_MXNET_PYTHON"
RAW_CHUNK = 8 << 20

MXNET_RECORDIO = """
import json, sys, time
import mxnet as mx
path, repeats = sys.argv[1], int(sys.argv[2])
best = float("inf")
for _ in range(repeats):
    reader = mx.recordio.MXRecordIO(path, "r")
    start = time.perf_counter()
    while reader.read() is not None:
        pass
    best = min(best, time.perf_counter() - start)
    reader.close()
print(json.dumps({"seconds": best}))
"""

MXNET_IMAGES = """
import json, sys, time
import mxnet as mx
path, threads, batch, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data_iter = mx.io.ImageRecordIter(
    path_imgrec=path, data_shape=(3, 224, 224), batch_size=batch, rand_crop=True, rand_mirror=True,
    preprocess_threads=threads, prefetch_buffer=4, round_batch=False,
)
for _ in data_iter:
    pass
best = float("inf")
for _ in range(repeats):
    data_iter.reset()
    start = time.perf_counter()
    images = 0
    for data_batch in data_iter:
        data_batch.data[0].wait_to_read()
        images += batch - data_batch.pad
    best = min(best, time.perf_counter() - start)
print(json.dumps({"seconds": best, "images": images}))
"""


# Record-size mixes: (probability, smallest, largest) per size class.
MIXES = {
    "mixed": [(0.80, 100, 4 << 10), (0.15, 4 << 10, 64 << 10), (0.05, 64 << 10, 1 << 20)],
    "image-sized": [(1.0, 16 << 10, 512 << 10)],
}


def make_record_file(path: str, total_bytes: int, mix: str = "mixed", seed: int = 0) -> int:
    """Write records of the size mix ``mix`` until ``total_bytes``; return how many."""
    from mxkit.io.recordio import MXRecordIO

    rng = np.random.default_rng(seed)
    pool = rng.bytes(4 << 20)
    classes = MIXES[mix]
    cumulative = np.cumsum([p for p, _, _ in classes])
    written = count = 0
    with MXRecordIO(path, "w") as writer:
        while written < total_bytes:
            _, low, high = classes[min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(classes) - 1)]
            size = int(rng.integers(low, high))
            start = int(rng.integers(0, len(pool) - size))
            writer.write(pool[start:start + size])
            written += size
            count += 1
    return count


def make_image_file(path: str, count: int, seed: int = 0) -> None:
    """``count`` 256x256 JPEGs (smooth gradients plus noise, quality 90) with labels."""
    from mxkit.io.recordio import IRHeader, MXRecordIO, pack_img

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:256, 0:256]
    with MXRecordIO(path, "w") as writer:
        for index in range(count):
            phase = rng.integers(0, 256, size=3)
            img = np.stack([(xx + phase[0]) % 256, (yy + phase[1]) % 256, ((xx + yy) // 2 + phase[2]) % 256], -1)
            img = np.clip(img + rng.integers(-20, 20, size=img.shape), 0, 255).astype(np.uint8)
            writer.write(pack_img(IRHeader(0, float(index % 10), index, 0), img, quality=90))


def raw_read_seconds(path: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        with open(path, "rb") as handle:
            while handle.read(RAW_CHUNK):
                pass
        best = min(best, time.perf_counter() - start)
    return best


def mxkit_read_seconds(path: str, repeats: int) -> float:
    from mxkit.io.recordio import MXRecordIO

    best = float("inf")
    for _ in range(repeats):
        reader = MXRecordIO(path, "r")
        start = time.perf_counter()
        while reader.read() is not None:
            pass
        best = min(best, time.perf_counter() - start)
        reader.close()
    return best


def mxkit_images_per_second(path: str, threads: int, batch: int, repeats: int) -> float:
    from mxkit.io import ImageRecordIter

    data_iter = ImageRecordIter(path, (3, 224, 224), batch, rand_crop=True, rand_mirror=True,
                                preprocess_threads=threads, prefetch_buffer=4, round_batch=False)
    for _ in data_iter:
        pass
    best = float("inf")
    images = 0
    for _ in range(repeats):
        data_iter.reset()
        start = time.perf_counter()
        images = 0
        for data_batch in data_iter:
            images += batch - data_batch.pad
        best = min(best, time.perf_counter() - start)
    data_iter.close()
    return images / best


def run_mxnet(script: str, *args: object) -> dict[str, float] | None:
    interpreter = os.environ.get(MXNET_PYTHON_ENV)
    if not interpreter:
        return None
    result = subprocess.run([interpreter, "-c", script, *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"(MXNet run failed: {result.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def kib(size: int) -> str:
    return f"{size >> 10}K" if size >= 1024 else f"{size}B"


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}" if value and base else "-"


def number(value: float | None, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if value else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the record file (default 1 GiB)")
    parser.add_argument("--images", type=int, default=1024, help="images in the image file")
    parser.add_argument("--batch", type=int, default=32, help="batch size of the image iterators")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best is kept)")
    parser.add_argument("--workdir", default=None, help="where to write the files (default: a temp dir)")
    args = parser.parse_args()
    os.environ["MXKIT_IO_BATCH_TYPE"] = "numpy"
    mxnet_python = os.environ.get(MXNET_PYTHON_ENV)

    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        print(f"RecordIO sequential read, page cache warm, best of {args.repeats}")
        print(f"{'file / reader':<44}{'MB/s':>10}{'x raw':>9}{'x MXNet':>9}")
        for mix in MIXES:
            records = os.path.join(workdir, f"{mix}.rec")
            count = make_record_file(records, args.size_mb << 20, mix)
            size_mb = os.path.getsize(records) / (1 << 20)
            raw_read_seconds(records, 1)  # into the page cache
            raw = size_mb / raw_read_seconds(records, args.repeats)
            ours = size_mb / mxkit_read_seconds(records, args.repeats)
            mxnet_run = run_mxnet(MXNET_RECORDIO, records, args.repeats)
            mxnet = size_mb / mxnet_run["seconds"] if mxnet_run else None
            os.remove(records)
            sizes = ", ".join(f"{p:.0%} {kib(lo)}-{kib(hi)}" for p, lo, hi in MIXES[mix])
            print(f"{mix} records: {size_mb:.0f} MiB, {count} records ({sizes})")
            print(f"{'  file.read(8 MiB) loop (the limit)':<44}{number(raw):>10}{'1.00':>9}{ratio(raw, mxnet):>9}")
            print(f"{'  mxkit MXRecordIO.read':<44}{number(ours):>10}{ratio(ours, raw):>9}{ratio(ours, mxnet):>9}")
            print(f"{'  MXNet 1.9.1 MXRecordIO.read':<44}{number(mxnet):>10}{ratio(mxnet, raw):>9}"
                  f"{ratio(mxnet, mxnet):>9}")
        print()

        images = os.path.join(workdir, "images.rec")
        try:
            make_image_file(images, args.images)
        except MissingComponentError as exc:  # OpenCV is the optional mxkit-io[image] extra
            print(f"ImageRecordIter: skipped ({exc})")
        else:
            image_rows(images, args)
    if not mxnet_python:
        print(f"(set {MXNET_PYTHON_ENV} to a Python with mxnet 1.9.1 to fill the MXNet columns)")


def image_rows(images: str, args: argparse.Namespace) -> None:
    """The ImageRecordIter table: images/s with 1 and 2 decode threads, mxkit and MXNet."""
    print(f"ImageRecordIter: {args.images} JPEGs 256x256 -> (3, 224, 224), rand_crop + rand_mirror, "
          f"batch {args.batch}, steady-state epoch")
    print(f"{'threads':<10}{'mxkit img/s':>14}{'MXNet img/s':>14}{'mxkit/MXNet':>13}")
    for threads in (1, 2):
        ours_rate = mxkit_images_per_second(images, threads, args.batch, args.repeats)
        mxnet_images = run_mxnet(MXNET_IMAGES, images, threads, args.batch, args.repeats)
        mxnet_rate = mxnet_images["images"] / mxnet_images["seconds"] if mxnet_images else None
        print(f"{threads:<10}{number(ours_rate):>14}{number(mxnet_rate):>14}{ratio(ours_rate, mxnet_rate):>13}")


if __name__ == "__main__":
    main()
