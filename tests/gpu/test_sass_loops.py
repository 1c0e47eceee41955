"""bench/gpu/sass_loops.py's readers of ptxas and cuobjdump output, on text in their formats (no GPU,
no CUDA tools needed)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import sass_loops  # noqa: E402

SASS = """
Fatbin elf code:
================
arch = sm_90a

\tcode for sm_90a
\t\tFunction : _Z5outerPi
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
        /*0010*/                   MOV R2, RZ ;                                /* 0x000000ff00027202 */
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;            /* 0x0000000402047981 */
        /*0030*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;        /* 0x0000000604087237 */
        /*0040*/              @!P0 BRA 0x20 ;                                  /* 0xfffffffc00f08947 */
        /*0050*/                   LOP3.LUT R4, R4, 0xf000f, R9, 0xea, !PT ;   /* 0x000f000f04047812 */
        /*0060*/                   SHF.R.U32.HI R5, RZ, 0x4, R4 ;              /* 0x0000000400057819 */
        /*0070*/                   LOP3.LUT R4, R5, 0xf000f, R9, 0xea, !PT ;   /* 0x000f000f05047812 */
        /*0080*/               @P1 BRA 0x50 ;                                  /* 0xfffffffc00f01947 */
        /*0090*/              @!P2 BRA !P3, 0x10 ;                             /* 0xfffffffc00f0a947 */
        /*00a0*/                   BRA 0xc0 ;                                  /* 0x0000000000047947 */
        /*00b0*/                   EXIT ;                                      /* 0x000000000000794d */
        /*00c0*/                   BRA 0xc0;                                   /* 0xfffffffc00fc7947 */
\t\t..........

\t\tFunction : _Z5innerv
        /*0000*/                   EXIT ;                                      /* 0x000000000000794d */
\t\t..........
"""

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z5outerPi' for 'sm_90a'
ptxas info    : Function properties for _Z5outerPi
    16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16 bytes cumulative stack size
ptxas info    : Compiling entry function '_Z5innerv' for 'sm_90a'
ptxas info    : Function properties for _Z5innerv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers
"""


def test_kernels_are_split_at_their_headers_with_every_instruction():
    kernels = sass_loops.kernels_sass(SASS)
    assert list(kernels) == ["_Z5outerPi", "_Z5innerv"]
    assert len(kernels["_Z5outerPi"]) == 13
    assert kernels["_Z5outerPi"][2] == (0x20, "LDG.E.128 R4, desc[UR4][R2.64]")
    assert kernels["_Z5innerv"] == [(0, "EXIT")]


def test_opcode_drops_predicates_and_modifiers():
    assert sass_loops.opcode("@!P0 LDG.E.NA.128.CONSTANT R4, desc[UR4][R2.64]") == "LDG"
    assert sass_loops.opcode("@UP1 HMMA.16816.F32.BF16 R8, R4, R6, R8") == "HMMA"
    assert sass_loops.opcode("IMAD.MOV.U32 R1, RZ, RZ, R2") == "IMAD"


def test_the_loop_is_the_innermost_one_holding_the_preferred_opcode():
    instructions = sass_loops.kernels_sass(SASS)["_Z5outerPi"]
    # 0x40 -> 0x20 and 0x90 -> 0x10 (two predicates) hold the HMMA at 0x30; the second holds the first,
    # as a branch back around a whole kernel body holds its tile loop, so the first is the loop.
    # 0xc0's branch to itself is the trap at the end, not a loop.
    assert [a for a, _ in sass_loops.tile_loop(instructions)] == [0x20, 0x30, 0x40]
    # SHF lies in 0x80 -> 0x50 and in 0x90 -> 0x10: the inner one.
    assert [a for a, _ in sass_loops.tile_loop(instructions[:10], "SHF")] == list(range(0x50, 0x90, 0x10))
    assert sass_loops.tile_loop([(0, "EXIT")]) == []


def test_without_the_preferred_opcode_the_widest_loop_is_taken():
    instructions = sass_loops.kernels_sass(SASS)["_Z5outerPi"]
    assert [a for a, _ in sass_loops.tile_loop(instructions, "EXIT")] == list(range(0x10, 0xA0, 0x10))
    inner_only = [(a, t) for a, t in instructions if a != 0x90]
    assert [a for a, _ in sass_loops.tile_loop(inner_only, "EXIT")] == list(range(0x50, 0x90, 0x10))


def test_of_two_innermost_loops_holding_it_the_longer_wins():
    instructions = [(0x00, "HMMA.16816.F32.BF16 R8, R4, R6, R8"), (0x10, "BRA 0x0"),
                    (0x20, "LOP3.LUT R4, R4, 0xf000f, R9, 0xea, !PT"), (0x30, "HMMA.16816.F32.BF16 R8, R4, R6, R8"),
                    (0x40, "@P0 BRA 0x20")]
    assert [a for a, _ in sass_loops.tile_loop(instructions)] == [0x20, 0x30, 0x40]


def test_ptxas_figures_belong_to_their_own_kernel():
    resources = sass_loops.ptxas_resources(PTXAS)
    assert resources["_Z5outerPi"] == {"registers": 128, "spill_stores": 12, "spill_loads": 8}
    assert resources["_Z5innerv"] == {"registers": 4, "spill_stores": 0, "spill_loads": 0}
