#!/usr/bin/env python3
"""Builds the cubin wheel svdq-cubin-cu<XYZ>: an AOT package of every svdq module for an arch list (FlashInfer's
jit-cache wheels, for svdq). The svdq Python package finds it by itself when its version matches (svdq/_cubin.py)
and searches it before the disk cache, so `SVDQ_DISABLE_JIT=1` with the wheel installed compiles nothing.

    tools/build_cubin_wheel.py --svdq build/release/svdq --cuda cu130 --arch-list "8.0 8.9 9.0a 10.0a 10.3a 12.0f" \\
        --out dist [--previous OLD_PACKAGE_DIR] [--max-size 2GiB] [--jobs N]

The arch list of a toolkit is the one data/arch_tiers.json gives it (e.g. `svdq aot` / `svdq census` of cu130). The
build fails, writing no wheel, when `svdq aot` leaves a target empty or `svdq census --expect --max-size` finds a
routed module missing for a listed arch, an arch lost against --previous, or the package over the size ceiling.
Standard library only: the wheel is a zip with its dist-info written here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True)
    sys.stdout.write(r.stdout[-4000:])
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit(f"build_cubin_wheel: {cmd[1]} failed (exit {r.returncode}); no wheel written")
    return r.stdout


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--svdq", required=True, help="the svdq CLI of the same version as the package it serves")
    ap.add_argument("--cuda", required=True, help="toolkit tag, e.g. cu130 (the NVRTC that compiles the cubins)")
    ap.add_argument("--arch-list", required=True, help='e.g. "8.0 8.9 9.0a 10.0a 10.3a 12.0f"')
    ap.add_argument("--out", required=True, help="directory for the .whl")
    ap.add_argument("--previous", help="the previous wheel's AOT package directory: no module x arch may be lost")
    ap.add_argument("--max-size", default="2GiB", help="size ceiling of the package (release assets: 2 GiB)")
    ap.add_argument("--jobs", default="0", help="parallel compiles (0: one per core)")
    ap.add_argument("--package", help="use this already built AOT package directory instead of running svdq aot")
    ap.add_argument("--version", help="the version to stamp (default: the svdq CLI's)")
    a = ap.parse_args()
    if not re.fullmatch(r"cu\d{3}", a.cuda):
        ap.error(f"argument --cuda: expected cuXYZ (e.g. cu130), got {a.cuda!r}")

    info = subprocess.run([a.svdq, "--version"], text=True, capture_output=True)
    m = re.search(r"(\d+\.\d+\.\d+)", info.stdout + info.stderr)
    if not m and not a.version:
        raise SystemExit(f"build_cubin_wheel: cannot read the version of {a.svdq}")
    version = a.version or m.group(1)
    dist = f"svdq_cubin_{a.cuda}"

    with tempfile.TemporaryDirectory() as tmp:
        pkg = a.package or os.path.join(tmp, "pkg")
        if not a.package:
            run([a.svdq, "aot", "--arch-list", a.arch_list, "--out", pkg, "--jobs", a.jobs])
        census = [a.svdq, "census", pkg, "--expect", "--max-size", a.max_size]
        if a.previous:
            census += ["--previous", a.previous]
        census_out = run(census)

        files = {}
        for root, _, names in os.walk(pkg):
            for n in sorted(names):
                p = os.path.join(root, n)
                files[f"{dist}/package/{os.path.relpath(p, pkg)}"] = open(p, "rb").read()
        files[f"{dist}/__init__.py"] = (
            f'"""svdq AOT cubins for {a.cuda}, arch list {a.arch_list!r}, for svdq {version}."""\n'
            "import os\n\n"
            f"SVDQ_VERSION = {version!r}\nCUDA = {a.cuda!r}\nARCH_LIST = {a.arch_list!r}\n\n\n"
            "def package_dir():\n"
            '    """The AOT package directory (for SVDQ_AOT_DIR)."""\n'
            '    return os.path.join(os.path.dirname(__file__), "package")\n'
        ).encode()
        files[f"{dist}/CENSUS.txt"] = census_out.encode()
        info_dir = f"{dist}-{version}.dist-info"
        files[f"{info_dir}/METADATA"] = (
            "Metadata-Version: 2.1\n"
            f"Name: svdq-cubin-{a.cuda}\nVersion: {version}\n"
            f"Summary: svdq's kernels compiled ahead of time for {a.cuda} ({a.arch_list})\n"
            f"Requires-Dist: svdq=={version}\n").encode()
        files[f"{info_dir}/WHEEL"] = (
            "Wheel-Version: 1.0\nGenerator: svdq tools/build_cubin_wheel.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ).encode()
        record = [record_line(n, d) for n, d in files.items()] + [f"{info_dir}/RECORD,,"]
        files[f"{info_dir}/RECORD"] = ("\n".join(record) + "\n").encode()

        os.makedirs(a.out, exist_ok=True)
        wheel = os.path.join(a.out, f"{dist}-{version}-py3-none-any.whl")
        part = wheel + ".part"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in files.items():
                zi = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible bytes
                zi.external_attr = 0o644 << 16
                z.writestr(zi, d, zipfile.ZIP_DEFLATED)
        shutil.move(part, wheel)
    print(f"wrote {wheel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
