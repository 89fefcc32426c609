#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses (scripts/fuzz.sh): make_seeds.py ROOT OUT [PACKAGE_DIR].

Writes OUT/<harness>/<name> for arch_list, route_table, manifest and census, from the repository's real files
(data/arch_tiers.json, data/routes/*.json), from an AOT package when PACKAGE_DIR holds one (its build.json and the
smallest modules' fatbin containers and cubins), and from small hand-made inputs (ELF headers, cubins with a
.note.nv.tkinfo note, fatbins, a host ELF with .nv_fatbin, PTX, a manifest written to the parser's rules).
"""
import json
import os
import struct
import sys


def write(out, harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- ELF / fatbin builders (ELF64 little-endian) ---

def elf(machine, e_flags, sections, abi=8, osabi=0x41, e_type=2):
    """sections: list of (name, type, flags, align, data). Adds the null section and .shstrtab."""
    names = b"\0"
    offs = []
    for s in sections + [(".shstrtab", 3, 0, 1, None)]:
        offs.append(len(names))
        names += s[0].encode() + b"\0"
    body = b""
    hdrs = [b"\0" * 64]
    cur = 64
    all_secs = sections + [(".shstrtab", 3, 0, 1, names)]
    for i, (name, typ, flags, align, data) in enumerate(all_secs):
        while (cur + len(body)) % max(align, 1):
            body += b"\0"
        off = 64 + len(body)
        body += data
        hdrs.append(struct.pack("<IIQQQQIIQQ", offs[i], typ, flags, 0, off, len(data), 0, 0, align, 0))
    while len(body) % 8:
        body += b"\0"
    shoff = 64 + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1, osabi, abi]) + b"\0" * 7
    eh = ident + struct.pack("<HHIQQQIHHHHHH", e_type, machine, 1, 0, 0, shoff, e_flags, 64, 0, 0, 64,
                             len(hdrs), len(hdrs) - 1)
    return eh + body + b"".join(hdrs)


def note(owner, typ, desc, align=4):
    name = owner.encode() + b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % align)
    return struct.pack("<III", len(name), len(desc), typ) + pad(name) + pad(desc)


def tkinfo(tool, version, options):
    strings = b"\0" + b"obj\0"
    o_obj = 1
    o_tool = len(strings); strings += tool.encode() + b"\0"
    o_ver = len(strings); strings += version.encode() + b"\0"
    o_branch = len(strings); strings += b"\0"
    o_opts = len(strings); strings += options.encode() + b"\0"
    desc = struct.pack("<IIIIII", 2, o_obj, o_tool, o_ver, o_branch, o_opts) + strings
    return note("NVIDIA Corp", 2000, desc)


def cubin(sm, suffix="", abi=8, tk=True):
    if abi >= 8:
        flags = 0x06000002 | (sm << 8) | (0x8 if suffix == "a" else 0)
    else:
        flags = 0x0d0000 | sm | (sm << 16) | (0x800 if suffix == "a" else 0)
    secs = [(".text.k", 1, 6, 128, b"\x00" * 32)]
    if tk:
        secs.append((".note.nv.tkinfo", 7, 0, 4,
                     tkinfo("ptxas", "Cuda compilation tools, release 13.0, V13.0.88",
                            "-arch sm_%d%s -m 64" % (sm, suffix))))
    return elf(190, flags, secs, abi=abi)


def fatbin(entries):
    """entries: (kind, sm, flags, payload, header_size)."""
    body = b""
    for kind, sm, flags, payload, hsize in entries:
        payload = payload + b"\0" * (-len(payload) % 8)
        h = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, hsize, len(payload), 0, 64 if hsize > 64 else 0,
                        0 if kind == 1 else 8, 1 if kind == 2 else 8, sm, 0, 0, flags, 0, 0)
        if hsize > 64:
            h += struct.pack("<II", 72, 0) + b"\0" * (hsize - 72)
        body += h + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


PTX = ".version 9.0\n.target sm_90a\n.address_size 64\n\n.visible .entry k()\n{\n\tret;\n}\n"


def census_seeds(out, package):
    c90a = cubin(90, "a")
    write(out, "census", "cubin_sm90a_tkinfo", c90a)
    write(out, "census", "cubin_sm100f_tkinfo", cubin(100, "f"))
    write(out, "census", "cubin_sm80_abi7", cubin(80, "", abi=7, tk=False))
    write(out, "census", "cubin_sm90a_abi7", cubin(90, "a", abi=7, tk=False))
    write(out, "census", "cubin_no_tkinfo", cubin(120, "", tk=False))
    write(out, "census", "elf_header_only_cubin",
          b"\x7fELF\x02\x01\x01\x41\x08" + b"\0" * 7 + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 0, 0x6005a02,
                                                                   64, 0, 0, 64, 0, 0))
    write(out, "census", "elf_header_only_host",
          b"\x7fELF\x02\x01\x01\x00\x00" + b"\0" * 7 + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, 0, 0,
                                                                   64, 0, 0, 64, 0, 0))
    fb = fatbin([(2, 90, 0x100011, c90a, 64), (1, 90, 0x100011, PTX.encode() + b"\0", 80),
                 (2, 100, 0x208011, b"\x28\xb5\x2f\xfd" + b"\0" * 12, 64)])
    write(out, "census", "fatbin_elf_ptx_compressed", fb)
    write(out, "census", "fatbin_two_containers", fatbin([(1, 80, 0x11, PTX.replace("sm_90a", "sm_80").encode(), 80)])
          + b"\0" * 8 + fatbin([(2, 100, 0x200011, cubin(100, "f"), 64)]))
    write(out, "census", "host_elf_nv_fatbin", elf(62, 0, [(".nv_fatbin", 1, 2, 8, fb)], abi=0, osabi=0, e_type=1))
    write(out, "census", "host_elf_relfatbin", elf(62, 0, [("__nv_relfatbin", 1, 2, 8, fb)], abi=0, osabi=0,
                                                   e_type=1))
    write(out, "census", "ptx", PTX)
    if not package:
        return
    man = os.path.join(package, "build.json")
    arc = os.path.join(package, "svdq_modules.fatbin")
    if not (os.path.isfile(man) and os.path.isfile(arc)):
        return
    mods = sorted(json.load(open(man))["modules"], key=lambda m: m["size"])
    with open(arc, "rb") as f:
        for m in [x for x in mods if x["size"] > 0][:2]:
            f.seek(m["offset"])
            container = f.read(m["size"])
            write(out, "census", "pkg_fatbin_" + m["build_id"], container)
            # The first entry's payload: a cubin as NVRTC wrote it.
            hsize, psize = struct.unpack_from("<IQ", container, 16 + 4)
            write(out, "census", "pkg_cubin_" + m["build_id"], container[16 + hsize:16 + hsize + psize])


# --- text seeds ---

def arch_seeds(root, out):
    tiers = json.load(open(os.path.join(root, "data", "arch_tiers.json")))
    lists = set()
    for tk in tiers.get("toolkits", []):
        lists.update(tk.get("arch_lists", {}).values())
        if "version" in tk:
            lists.add(tk["version"])
    lists.update(["8.0", "9.0a", "10.0f", "7.5 8.0 8.9 9.0a 10.0a 10.3a 12.0f", "8.0;9.0a;10.0f", "8.0,9.0a, 12.1a",
                  "sm_90a", "sm_100f", "compute_80", "compute_120a", "12.9", "13.0"])
    for i, text in enumerate(sorted(lists)):
        write(out, "arch_list", "seed_%02d" % i, text)


def route_seeds(root, out):
    d = os.path.join(root, "data", "routes")
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        text = open(os.path.join(d, name)).read()
        write(out, "route_table", name, text)
        t = json.loads(text)
        t["provenance"] = "svdq tune on NVIDIA H200: 30 shapes, 7 candidate builds"
        for n in (0, 1, 2):
            small = dict(t, records=t["records"][:n])
            write(out, "route_table", "%s.%drec" % (name, n), json.dumps(small, indent=1, sort_keys=True))


HAND_MANIFEST = {
    "format": "svdq-package/1", "svdq_version": "0.1.0 (commit fuzz)", "nvrtc_version": "13.0",
    "arch_list": "8.0 9.0a 10.0f", "archive": "svdq_modules.fatbin", "archive_bytes": 4096,
    "compile_options": ["-std=c++17", "-lineinfo"],
    "modules": [
        {"unit": "sm80_svdq_gemm_0123456789abcdef0123", "build_id": "sm80_gemm_m128_s4_t1",
         "program": "sm80_svdq_gemm", "kernel": "svdq_sm80_gemm",
         "params": {"bm": 128, "bn": 128, "min_cc": 80, "smem_bytes": 65536, "stages": 4, "threads": 256,
                    "tile_bufs": 1},
         "offset": 0, "size": 2048,
         "targets": [{"arch": "8.0", "target": "sm_80", "bytes": 1000},
                     {"arch": "10.0f", "target": "sm_100f", "bytes": 1000}],
         "skipped": []},
        {"unit": "smxx_dequant_fp16_0123456789abcdef0123", "build_id": "smxx_dequant_fp16",
         "program": "smxx_dequant_fp16", "kernel": "svdq_smxx_dequant_fp16",
         "params": {"min_cc": 80, "smem_bytes": 0, "threads": 256},
         "offset": 2048, "size": 2048, "targets": [{"arch": "9.0a", "target": "sm_90a", "bytes": 2000}],
         "skipped": [{"arch": "8.0", "reason": "not planned"}, {"arch": "10.0f", "reason": "gated"}]},
    ],
}


def manifest_seeds(out, package):
    write(out, "manifest", "hand_made.json", json.dumps(HAND_MANIFEST, indent=1, sort_keys=True))
    small = dict(HAND_MANIFEST, modules=[])
    write(out, "manifest", "no_modules.json", json.dumps(small, sort_keys=True))
    man = os.path.join(package, "build.json") if package else ""
    if man and os.path.isfile(man):
        text = open(man).read()
        write(out, "manifest", "aot_9.0a_build.json", text)
        m = json.loads(text)
        write(out, "manifest", "aot_9.0a_3modules.json", json.dumps(dict(m, modules=m["modules"][:3]), indent=1,
                                                                   sort_keys=True))


def main():
    root, out = sys.argv[1], sys.argv[2]
    package = sys.argv[3] if len(sys.argv) > 3 else ""
    arch_seeds(root, out)
    route_seeds(root, out)
    manifest_seeds(out, package)
    census_seeds(out, package)


if __name__ == "__main__":
    main()
