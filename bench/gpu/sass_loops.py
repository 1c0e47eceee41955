"""The machine code of CUDA kernels without a GPU: compiles one source file for one architecture, then
prints, per kernel, its registers and spills (ptxas) and the instruction mix of its tile loop
(cuobjdump -sass): the widest innermost loop holding a tensor-core step, where there are such. For the decode
mat-vecs, whose time goes to the instructions per tile and their latency more than to DRAM
(bench/RESULTS.md), this counts a change's cost before any device time.

  python3 bench/gpu/sass_loops.py [--source src/ops/cuda/matvec_tiles.cu] [--arch sm_90a] \
      [--kernel REGEX] [--show-loop] [--json OUT]

REGEX picks kernels by mangled name, e.g. 'matvecI13__nv_bfloat16Li8ELi2ELi1ELi2ELi2ELb1ELi2E' for the
27B gate/up launch (bf16 scales, 8 warps a row tile, two row tiles, groups of 64, depth 2, 2 blocks,
gate/up pairs, the scaled input). cuobjdump and nvdisasm come from the CUDA toolkit when it has them,
else from NVIDIA's PyPI wheels (tools/requirements-sass.txt), installed into .venv on first use.
"""
import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"


def cuda_tool(name: str) -> str:
    """Path of cuobjdump (which calls nvdisasm from its own folder or the PATH)."""
    toolkit = Path("/usr/local/cuda/bin")
    if (toolkit / name).exists() and (toolkit / "nvdisasm").exists():
        return str(toolkit / name)
    if shutil.which(name) and shutil.which("nvdisasm"):
        return shutil.which(name)
    wheel = list(VENV.glob(f"lib/python3*/site-packages/nvidia/cu*/bin/{name}"))
    if not wheel:
        if not (VENV / "bin" / "pip").exists():
            sys.exit(f"sass_loops: no {name} here and no .venv to install it into (run scripts/setup.sh)")
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "-r", str(ROOT / "tools" / "requirements-sass.txt")], check=True)
        wheel = list(VENV.glob(f"lib/python3*/site-packages/nvidia/cu*/bin/{name}"))
    if not wheel:
        sys.exit(f"sass_loops: {name} not found after installing tools/requirements-sass.txt")
    return str(wheel[0])


def compile_object(source: Path, arch: str, obj: Path) -> str:
    """Compiles as the build does (Release, C++20), for `arch` only; returns ptxas' report."""
    virtual = "compute_" + arch.removeprefix("sm_")
    cmd = ["nvcc", "-I", str(ROOT / "src"), "-isystem=/usr/local/cuda/include", "-O3", "-DNDEBUG", "-std=c++20", "--extended-lambda",
           "-DHWY_SHARED_DEFINE", "-x", "cu", "-c", f"--generate-code=arch={virtual},code=[{arch}]", "-Xptxas", "-v", str(source), "-o",
           str(obj)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sass_loops: nvcc failed\n{r.stderr[-4000:]}")
    return r.stderr


def ptxas_resources(report: str) -> dict:
    """Mangled name -> registers, spill store and load bytes."""
    out = {}
    for block in re.split(r"ptxas info\s*: Compiling entry function '", report)[1:]:
        name = block.split("'")[0]
        regs = re.search(r"Used (\d+) registers", block)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block)
        out[name] = {"registers": int(regs.group(1)) if regs else None,
                     "spill_stores": int(spill.group(1)) if spill else 0,
                     "spill_loads": int(spill.group(2)) if spill else 0}
    return out


INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")


def kernels_sass(sass: str) -> dict:
    """Mangled name -> [(address, instruction text)]."""
    out = {}
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, _, body = part.partition("\n")
        out[name.strip()] = [(int(m.group(1), 16), m.group(2)) for m in map(INSTRUCTION.match, body.split("\n")) if m]
    return out


def opcode(text: str) -> str:
    """The instruction's opcode without its predicate and modifiers: '@!P0 LDG.E.128 R4, ...' -> 'LDG'."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def tile_loop(instructions: list, prefer: str = "HMMA") -> list:
    """The instructions between the target of a backward branch and that branch: of the innermost loops
    holding a `prefer` instruction (the mat-vecs' tile loop holds their tensor-core steps, a reduction
    loop after it does not; a branch back around the whole body, as a warp-collective's retry makes,
    holds the tile loop and is passed over) the one that spans the most, else of all loops."""
    spans = []
    for address, text in instructions:
        m = re.search(r"\bBRA\s+(?:!?U?P\w+,\s*)?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < address:
            spans.append((int(m.group(1), 16), address))
    loops = {span: [(a, t) for a, t in instructions if span[0] <= a <= span[1]] for span in spans}
    holding = [span for span, loop in loops.items() if any(opcode(t) == prefer for _, t in loop)]
    innermost = [s for s in holding if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in holding)]
    return max((loops[s] for s in innermost) if innermost else loops.values(), key=len, default=[])


def demangle(name: str) -> str:
    r = subprocess.run(["c++filt", name], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default="src/ops/cuda/matvec_tiles.cu")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--kernel", default="", help="regular expression on mangled names")
    ap.add_argument("--show-loop", action="store_true", help="print each picked kernel's loop")
    ap.add_argument("--loop-opcode", default="HMMA", help="take the widest innermost loop holding this opcode")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "k.o"
        resources = ptxas_resources(compile_object(ROOT / args.source, args.arch, obj))
        sass = subprocess.run([cuda_tool("cuobjdump"), "-sass", str(obj)], capture_output=True, text=True, check=True).stdout
    results = {}
    for name, instructions in sorted(kernels_sass(sass).items()):
        if args.kernel and not re.search(args.kernel, name):
            continue
        loop = tile_loop(instructions, args.loop_opcode)
        mix = collections.Counter(opcode(t) for _, t in loop)
        results[name] = {"instructions": len(instructions), "loop": len(loop), "loop_mix": dict(mix.most_common()),
                         **resources.get(name, {})}
        r = results[name]
        print(f"{demangle(name)}\n  {r['instructions']} instructions, {r.get('registers')} registers, spills "
              f"{r.get('spill_stores', 0)} / {r.get('spill_loads', 0)} bytes; loop {r['loop']}: "
              + ", ".join(f"{k} {v}" for k, v in mix.most_common()))
        if args.show_loop:
            for address, text in loop:
                print(f"    {address:05x}  {text}")
    if not results:
        sys.exit(f"sass_loops: no kernel of {args.source} matches '{args.kernel}'")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
