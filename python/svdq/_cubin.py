"""Finds the cubin wheel (svdq-cubin-cu<XYZ>, tools/build_cubin_wheel.py) of the toolkit this library was built
with and puts its AOT package first on SVDQ_AOT_DIR, so kernels load from it before the disk cache and nothing is
compiled for the arches it holds. A wheel of another svdq version is reported and not used."""

from __future__ import annotations

import importlib
import os
import warnings

from . import _C


def attach(version: str):
    """Returns the package directory it attached, or None (no wheel, or a mismatched one)."""
    name = f"svdq_cubin_{_C.cuda_tag()}"
    try:
        mod = importlib.import_module(name)
    except ImportError:
        return None
    if getattr(mod, "SVDQ_VERSION", None) != version:
        warnings.warn(f"{name.replace('_', '-')} {getattr(mod, 'SVDQ_VERSION', '?')} does not match svdq {version}: "
                      "not used (install the matching version; kernels are compiled at run time meanwhile)",
                      RuntimeWarning, stacklevel=3)
        return None
    d = mod.package_dir()
    dirs = [p for p in os.environ.get("SVDQ_AOT_DIR", "").split(":") if p]
    if d not in dirs:
        os.environ["SVDQ_AOT_DIR"] = ":".join([d] + dirs)
    return d
