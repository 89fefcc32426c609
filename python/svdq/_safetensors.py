"""The safetensors file format, read and written with NumPy only (no torch, no `safetensors` package needed).

A file is an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
{str: str}} and the tensors' bytes (row-major, little-endian) back to back. Tensors come back as `Tensor` (the
safetensors dtype name and a NumPy array of its bits: BF16 as uint16, F8_E4M3 as uint8). Every structural defect
(truncated file, header out of bounds, offsets that overlap, leave gaps or disagree with dtype x shape, unknown dtype)
is a `CheckpointError` naming the file and the tensor.
"""

from __future__ import annotations

import json
import os
from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or converted; the message names the file or tensor and the rule."""


# safetensors dtype name -> the NumPy dtype holding its bits
DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "F8_E4M3": np.dtype(np.uint8),
    "F8_E5M2": np.dtype(np.uint8),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F64": np.dtype("<f8"),
}

_MAX_HEADER = 100 * 1024 * 1024  # the safetensors library's own limit


class Tensor(NamedTuple):
    dtype: str  # safetensors name: "BF16", "F8_E4M3", "U8", ...
    array: np.ndarray  # its bits, in DTYPES[dtype]

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.array.shape)


def read(path: str) -> Tuple[Dict[str, Tensor], Dict[str, str]]:
    """Reads a whole safetensors file -> ({name: Tensor}, metadata). Arrays are copies (the file is closed)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: not a safetensors file: {size} bytes, shorter than the 8-byte header "
                                      "length")
            n = int.from_bytes(head, "little")
            if n > _MAX_HEADER or 8 + n > size:
                raise CheckpointError(f"{path}: header length {n} does not fit the file ({size} bytes): truncated or "
                                      "not a safetensors file")
            raw = f.read(n)
            data = np.fromfile(f, dtype=np.uint8)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e}") from e
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: the header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CheckpointError(f"{path}: __metadata__ must map strings to strings")
    spans = []
    out: Dict[str, Tensor] = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{path}: tensor '{name}': entry must have exactly dtype, shape and data_offsets")
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in DTYPES:
            raise CheckpointError(f"{path}: tensor '{name}': unknown dtype {dt!r} (known: {', '.join(DTYPES)})")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)):
            raise CheckpointError(f"{path}: tensor '{name}': shape must be non-negative integers and data_offsets "
                                  "two integers")
        begin, end = offs
        nbytes = int(np.prod(shape, dtype=np.int64)) * DTYPES[dt].itemsize
        if not 0 <= begin <= end or end - begin != nbytes:
            raise CheckpointError(f"{path}: tensor '{name}': data_offsets {offs} do not hold {dt} {shape} "
                                  f"({nbytes} bytes)")
        if end > data.size:
            raise CheckpointError(f"{path}: tensor '{name}' ends at byte {end} of a {data.size}-byte data section: "
                                  "the file is truncated")
        spans.append((begin, end, name))
        arr = data[begin:end].view(DTYPES[dt]).reshape(shape) if nbytes else np.zeros(shape, DTYPES[dt])
        out[name] = Tensor(dt, arr.copy())
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise CheckpointError(f"{path}: tensor '{name}' starts at byte {begin}, expected {pos}: tensors overlap "
                                  "or leave a gap")
        pos = end
    if pos != data.size:
        raise CheckpointError(f"{path}: {data.size - pos} bytes after the last tensor")
    return out, dict(meta)


def write(path: str, tensors: Dict[str, Tensor], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes tensors (sorted by name) and string metadata; the file appears whole or not at all."""
    header: dict = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise CheckpointError("metadata must map strings to strings")
        header["__metadata__"] = dict(metadata)
    blobs = []
    pos = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise CheckpointError(f"tensor '{name}': unknown dtype {t.dtype!r}")
        a = np.asarray(t.array)
        a = a if a.flags.c_contiguous else a.copy(order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        if a.dtype != DTYPES[t.dtype]:
            raise CheckpointError(f"tensor '{name}': {t.dtype} is stored as {DTYPES[t.dtype]}, got {a.dtype}")
        b = a.tobytes()
        header[name] = {"dtype": t.dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-byte aligned
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(raw).to_bytes(8, "little"))
            f.write(raw)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
