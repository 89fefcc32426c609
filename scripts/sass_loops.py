#!/usr/bin/env python3
"""Loops of a cuobjdump -sass listing: every backward branch's body (target .. branch) with its instruction count,
HGMMA and STS counts, largest first; bodies over MAX instructions (the whole-kernel spans of outer loops) are left
out. Usage: sass_loops.py FILE.sass [MAX]. The K loops of the sm_90a programs are the bodies holding the HGMMAs (a
64-wide K tile issues 4 of them, 8 in the m64n128 halves), the dequant warps' loops the ones holding the STS.128s.
ptxas places the retry paths of mbarrier waits out of line at the kernel's end, and branches back from there make
larger spans that contain a loop; the smallest span holding a group of HGMMAs (or STSs) is the loop itself."""
import re
import sys


def main():
    path, cap = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    ins = []
    for line in open(path):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)  # (addresses past 0xffff have 5+ digits)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    rows = []
    for addr, text in ins:
        b = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", text)
        if not b or int(b.group(1), 16) >= addr:
            continue
        body = [t for a, t in ins if int(b.group(1), 16) <= a <= addr]
        if len(body) <= cap:
            rows.append((len(body), b.group(1), hex(addr), sum("HGMMA" in t for t in body), sum("STS" in t for t in body)))
    for n, lo, hi, hg, sts in sorted(rows, reverse=True):
        if hg or sts:
            print(f"  loop {lo}..{hi}: {n} instructions, HGMMA {hg}, STS {sts}")


if __name__ == "__main__":
    main()
