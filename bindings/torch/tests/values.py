"""Inputs whose reductions are exact in every dtype and every reduction order.

Every rank can compute every rank's input, so each rank checks the full expected result. The
values are small integers (and, for PRODUCT, only 1, 2 and -1), so sums, products and averages
of any subset of ranks are representable even in float8: no order in which loom combines the
inputs can round differently.
"""

import torch
import torch.distributed as dist

N = 37  # odd, so that no block size lines up with a vector width

REAL = [
    torch.uint8,
    torch.int8,
    torch.int32,
    torch.int64,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]
FLOAT = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
# Moved but never reduced by loom: sent as bytes.
MOVE_ONLY = [torch.bool, torch.int16, torch.complex64, torch.complex128]

OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]


def is_float8(dtype) -> bool:
    return dtype in (torch.float8_e4m3fn, torch.float8_e5m2)


def signed(dtype) -> bool:
    return dtype not in (torch.uint8, torch.uint32, torch.uint64, torch.bool)


def supports(dtype, op) -> bool:
    """Whether this test covers (dtype, op); refusals are tested in test_errors."""
    if op == "PREMUL_SUM":
        return dtype in FLOAT or dtype in COMPLEX
    if dtype in COMPLEX:
        return op in ("SUM", "AVG")
    if dtype == torch.bool:
        return op in ("SUM", "PRODUCT", "MIN", "MAX")
    if is_float8(dtype):
        # AVG's inputs (up to 4 * 4) and PRODUCT's have partial results float8_e5m2 cannot
        # hold exactly, so a reduction order could round differently.
        return op in ("SUM", "MIN", "MAX")
    return True


def raw(rank: int, world: int, op: str, n: int = N) -> torch.Tensor:
    """Rank `rank`'s input as int64 (before the dtype)."""
    i = torch.arange(n, dtype=torch.int64)
    if op == "PRODUCT":
        return 1 + ((i + rank) % 3 == 0).long()  # 1 or 2: products up to 2**4
    if op == "AVG":
        # Every rank but the last sends c; the last makes the sum world * m.
        c = (i + 2 * rank) % 3
        if rank < world - 1:
            return c
        base = [(i + 2 * r) % 3 for r in range(world - 1)]
        m = (i % 3) + 2  # world * m > the others' sum, so the last value is positive
        return world * m - sum(base, torch.zeros_like(i))
    if op in ("MIN", "MAX"):
        return (i * 7 + rank * 3) % 5
    return (i + rank) % 3  # SUM, PREMUL_SUM: partial sums up to 8 for 4 ranks


def make(rank, world, op, dtype, n=N) -> torch.Tensor:
    v = raw(rank, world, op, n)
    if dtype == torch.bool:
        return (v % 2).bool()
    if dtype in COMPLEX:
        return torch.complex(v.double(), (v + 1).double()).to(dtype)
    if signed(dtype) and op in ("MIN", "MAX", "SUM"):
        v = v - 2
    if is_float8(dtype):
        return v.float().to(dtype)
    return v.to(dtype)


def reference(world, op, dtype, factor=2.0, n=N) -> torch.Tensor:
    """The exact reduction of all ranks' inputs, in `dtype`."""
    xs = [make(r, world, op, dtype, n) for r in range(world)]
    if dtype == torch.bool:
        wide = torch.stack([x.long() for x in xs])
        out = {"SUM": wide.amax(0), "MAX": wide.amax(0), "PRODUCT": wide.amin(0),
               "MIN": wide.amin(0)}[op]
        return out.bool()
    acc = torch.complex128 if dtype in COMPLEX else torch.float64
    if dtype in (torch.int64, torch.uint64, torch.uint32):
        acc = torch.int64
    wide = torch.stack([x.to(acc) for x in xs])
    if op == "SUM":
        out = wide.sum(0)
    elif op == "AVG":
        out = wide.sum(0) / world if acc != torch.int64 else wide.sum(0) // world
    elif op == "PRODUCT":
        out = wide.prod(0)
    elif op == "MIN":
        out = wide.amin(0)
    elif op == "MAX":
        out = wide.amax(0)
    else:  # PREMUL_SUM
        out = wide.sum(0) * factor
    return out.to(dtype)


def reduce_op(op, factor=2.0, tensor_factor=False):
    if op == "PREMUL_SUM":
        f = torch.tensor([factor]) if tensor_factor else factor
        return dist._make_nccl_premul_sum(f)
    return getattr(dist.ReduceOp, op)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality, also for dtypes torch.equal does not compare (float8, uint32)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
