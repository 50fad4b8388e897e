"""What every benchmark prints beside its figures: this machine's own fp32 matrix-multiply rate, measured
in the same run at the same thread count, the load average, and timings in wall-clock and CPU seconds.

On a shared machine the wall clock counts the time other jobs hold the cores; the CPU time of this
process does not (with one thread it is the steadier figure), and ratios of two paths timed side by
side in one run are steadier than either.

On a GPU (``--device cuda``) every clock is read after ``torch.cuda.synchronize()``, the matmul rate is
that of 4096 x 4096 products on the device in fp32 as the models run it (torch's default for fp32
matrix multiplies: no TF32), beside fp32 with TF32 allowed and bf16 (:func:`gpu_rates`), and the peak
GPU memory (``torch.cuda.max_memory_allocated``) of the timed work is kept. CPU time says little there
(the host waits for the device), and torch's CPU threads do not matter: one run, no thread loop.

    python bench/machine.py --device cuda      # the device and its matmul rates
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import torch
from quick import parse_args
from torch.utils.flop_counter import FlopCounterMode

T = TypeVar("T")
GPU_SIZE = 4096  # the side of the matrices whose product gives a GPU's rate


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda or cuda:N (default: %(default)s); on a GPU the thread options are ignored")


def device_of(name: str) -> torch.device:
    """The device ``name``, checked to exist (a clear exit otherwise); ``cuda`` is made ``cuda:0``."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise SystemExit(f"unknown device {name!r}; expected cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit(f"device {name!r} asked for, but torch sees no CUDA GPU here")
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise SystemExit(f"device {name!r}: the benchmarks run on cpu or cuda")
    return device


def add_precisions_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "int8"],
                        help=f"{what}'s precisions, timed in turn (default: fp32 and int8 on the CPU, "
                             "fp32 on a GPU, where int8 does not run)")


def precisions_of(parser: argparse.ArgumentParser, given: list[str] | None, device: torch.device) -> list[str]:
    """The precisions asked for, or the device's default: fp32 and int8 on the CPU, fp32 on a GPU."""
    if given is None:
        return ["fp32"] if is_gpu(device) else ["fp32", "int8"]
    if "fp32" not in given:
        parser.error("--precisions: fp32 is the baseline, give it too")
    if is_gpu(device) and "int8" in given:
        parser.error("int8 runs on the CPU only: give --precisions fp32 with --device cuda")
    return given


def is_gpu(device: torch.device | None) -> bool:
    return device is not None and device.type == "cuda"


def sync(device: torch.device | None) -> None:
    """Wait for the device's queued work (nothing to wait for on the CPU)."""
    if is_gpu(device):
        torch.cuda.synchronize(device)


def matmul_rate(size: int = 1024, repeat: int = 10, device: torch.device | None = None,
                dtype: torch.dtype = torch.float32) -> float:
    """Best fp32 ``torch.mm`` rate of ``size`` x ``size`` matrices with torch's current threads, in FLOP/s.

    On a GPU: of ``GPU_SIZE`` x ``GPU_SIZE`` matrices of ``dtype`` under the current TF32 setting, each
    timing a run of ``repeat`` products between synchronisations (the best of three)."""
    if not is_gpu(device):
        a, b = torch.randn(size, size), torch.randn(size, size)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
        return 2 * size ** 3 / best
    size = GPU_SIZE
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    out = torch.mm(a, b)
    sync(device)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            torch.mm(a, b, out=out)
        sync(device)
        best = min(best, (time.perf_counter() - start) / repeat)
    return 2 * size ** 3 / best


def tf32_in_use() -> bool:
    """Whether fp32 matrix multiplies may use TF32 now (torch's default, precision "highest": no)."""
    return torch.get_float32_matmul_precision() != "highest"


def gpu_rates(device: torch.device) -> dict[str, float]:
    """The device's ``torch.mm`` rates (FLOP/s): fp32 with TF32 off and on, and bf16; the fp32 matmul
    precision is put back as it was."""
    before = torch.get_float32_matmul_precision()
    rates = {}
    try:
        for name, precision, dtype in (("fp32", "highest", torch.float32), ("fp32 with TF32", "high", torch.float32),
                                       ("bf16", before, torch.bfloat16)):
            torch.set_float32_matmul_precision(precision)
            rates[name] = matmul_rate(device=device, dtype=dtype)
    finally:
        torch.set_float32_matmul_precision(before)
    return rates


def describe_gpu(device: torch.device) -> str:
    """The GPU, its memory, and its matmul rates measured now; which of them the models' fp32 uses."""
    properties = torch.cuda.get_device_properties(device)
    rates = gpu_rates(device)
    return (f"{device}: {properties.name}, {properties.total_memory / 2 ** 30:.0f} GiB, CUDA {torch.version.cuda}; "
            f"torch.mm {GPU_SIZE}x{GPU_SIZE}: " + ", ".join(f"{name} {rate / 1e12:.1f} TFLOP/s"
                                                            for name, rate in rates.items())
            + f"; the models run fp32 {'with' if tf32_in_use() else 'without'} TF32 "
              f"(float32 matmul precision {torch.get_float32_matmul_precision()!r}), and the shares below are of the "
              f"fp32 {'with TF32 ' if tf32_in_use() else ''}rate measured beside each run")


@contextlib.contextmanager
def flop_counter() -> Iterator[FlopCounterMode]:
    """``FlopCounterMode`` with cuDNN off for the block: FlopCounterMode has no formula for cuDNN's RNN
    kernels (a GPU's ``nn.GRU`` would count nothing), while torch's native GRU multiplies the same
    matrices as on the CPU. Nothing changes on the CPU."""
    enabled = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        with FlopCounterMode(display=False) as counter:
            yield counter
    finally:
        torch.backends.cudnn.enabled = enabled


@dataclass
class Timing:
    wall: float  # seconds
    cpu: float  # CPU seconds of this process, every thread
    matmul: float  # the machine's matmul rate (FLOP/s) measured just before
    memory: int = 0  # peak GPU memory allocated during the work (bytes); 0 on the CPU


def timed(work: Callable[[], T], rate: bool = True, device: torch.device | None = None) -> tuple[T, Timing]:
    """``work()``, its wall and CPU time, and the matmul rate: the higher of those measured just before and
    just after it (another job may hold the core during one of them); 0 without ``rate``. On a GPU the
    clocks are read after synchronising, and the peak memory is that of ``work`` alone."""
    matmul = matmul_rate(device=device) if rate else 0.0
    sync(device)
    if is_gpu(device):
        torch.cuda.reset_peak_memory_stats(device)
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    sync(device)
    timing = Timing(time.perf_counter() - wall, time.process_time() - cpu, matmul)
    if is_gpu(device):
        timing.memory = torch.cuda.max_memory_allocated(device)
    if rate:
        timing.matmul = max(matmul, matmul_rate(device=device))
    return result, timing


def share(flops: float, timing: Timing, cpu: bool = False) -> float:
    """The share of the machine's matmul rate that ``flops`` done in ``timing`` reach: by the wall clock,
    or with ``cpu`` by the CPU time spread over torch's threads (the time the job had the cores)."""
    seconds = timing.cpu / torch.get_num_threads() if cpu else timing.wall
    return flops / seconds / timing.matmul


MATMUL_OPS = frozenset({"mm", "addmm", "addmm_", "bmm", "baddbmm", "addmv", "addmv_", "mv"})  # as FlopCounterMode
KINDS = {  # torch operators by the kind of work they do (names without "aten::")
    "elementwise arithmetic": {"add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "addcmul",
                               "addcmul_", "sigmoid", "sigmoid_", "tanh", "tanh_", "exp", "exp_", "log", "log_",
                               "neg", "clamp", "clamp_", "where", "masked_fill", "masked_fill_", "maximum",
                               "sigmoid_backward", "tanh_backward", "threshold_backward", "pow", "sqrt", "reciprocal"},
    "softmax, top-k and reductions": {"_log_softmax", "_softmax", "_log_softmax_backward_data",
                                      "_softmax_backward_data", "sum", "amax", "max", "logsumexp", "mean",
                                      "linalg_vector_norm", "norm", "topk", "sort", "argsort"},
    "copies, indexing, joining": {"copy_", "cat", "stack", "index", "index_select", "index_put_", "_index_put_impl_",
                                  "gather", "scatter", "scatter_", "scatter_add_", "index_add_", "fill_", "zero_",
                                  "clone", "contiguous", "nonzero", "masked_select", "embedding",
                                  "embedding_dense_backward", "_pack_padded_sequence", "_pad_packed_sequence"},
    "random numbers (dropout masks)": {"bernoulli_", "uniform_", "normal_"},
    "optimizer": {"_fused_adam_", "_fused_adamw_", "_foreach_add_", "_foreach_mul_"},
}


@dataclass
class OpProfile:
    """Where the wall-clock time of some work went, by torch operator (self time, on the calling thread)."""

    wall: float  # seconds
    ops: dict[str, tuple[float, int]]  # operator -> (self seconds, calls)

    def kinds(self) -> dict[str, float]:
        """Seconds by kind of work: matrix multiplies, each of ``KINDS``, other torch operators, the bodies of
        autograd functions and of the recurrent kernels (named without "aten::"), and what ran outside
        every operator (Python, numpy and the profiler's own bookkeeping)."""
        seconds = dict.fromkeys(["matrix multiplies", *KINDS, "other torch operators",
                                 "autograd functions, recurrent kernels"], 0.0)
        for name, (time_spent, _) in self.ops.items():
            op = name.removeprefix("aten::")
            kind = ("matrix multiplies" if op in MATMUL_OPS else
                    next((k for k, ops in KINDS.items() if op in ops), None) or
                    ("other torch operators" if name.startswith("aten::") else "autograd functions, recurrent kernels"))
            seconds[kind] += time_spent
        seconds["outside torch operators"] = max(0.0, self.wall - sum(seconds.values()))
        return seconds

    def describe(self, flops: float, rate: float, work: float, unit: str, indent: str = "") -> str:
        """Lines that say where the time went, given ``flops`` (the matrix-multiply FLOPs of the work), the
        machine's matmul ``rate`` and the ``work`` units done: the seconds of each kind of work, the rate
        the matrix multiplies reached, and the bound they alone would set (at that rate, and at the machine's).
        Every line after the first starts with ``indent``."""
        kinds = self.kinds()
        matmul = kinds["matrix multiplies"]
        lines = [f"where the time went (torch profiler, {self.wall:.2f} s with its overhead):"]
        lines += [f"  {kind}: {seconds:.2f} s = {100 * seconds / self.wall:.1f}%" for kind, seconds in kinds.items()]
        lines[1] += f", at {flops / matmul / 1e9:.1f} GFLOP/s = {100 * flops / matmul / rate:.0f}% of the matmul rate"
        top = sorted(((s, op.removeprefix("aten::"), n) for op, (s, n) in self.ops.items()
                      if op.removeprefix("aten::") not in MATMUL_OPS), reverse=True)[:5]
        lines.append("  largest of the rest: " + ", ".join(f"{op} {s:.2f} s ({n:,} calls)" for s, op, n in top))
        lines.append(f"  if only the matrix multiplies took time: {work / matmul:,.0f} {unit}/s at the rate they "
                     f"reached, {work / (flops / rate):,.0f} {unit}/s at the machine's matmul rate")
        return f"\n{indent}".join(lines)


def add_profile_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--profile", action="store_true", help=f"also profile {what} by operator (CPU only)")


def check_profile(parser: argparse.ArgumentParser, profile: bool, device: torch.device | None) -> None:
    """``--profile`` goes with the CPU: on a GPU the operators' CPU time is that of launching kernels."""
    if profile and is_gpu(device):
        parser.error("--profile times CPU operators; on a GPU their CPU time is that of launching kernels")


def profile_ops(work: Callable[[], T]) -> tuple[T, OpProfile]:
    """``work()`` on the CPU under the torch profiler: its wall time and each operator's self time and calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        result = work()
        wall = time.perf_counter() - start
    ops = {event.key: (event.self_cpu_time_total / 1e6, event.count) for event in prof.key_averages()}
    return result, OpProfile(wall, ops)


def describe(device: torch.device | None = None) -> str:
    text = (f"{os.cpu_count()} CPUs, torch {torch.__version__}, load average "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if is_gpu(device):
        assert device is not None
        text += f"\n{describe_gpu(device)}; CPU threads do not matter here: one run, no thread loop"
    return text


def mib(size: float) -> str:
    return f"{size / 2 ** 20:,.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description="This machine's matmul rates.")
    add_device_argument(parser)
    device = device_of(parse_args(parser, {}).device)
    print(describe(device))
    if not is_gpu(device):
        for threads in sorted({1, torch.get_num_threads()}):
            torch.set_num_threads(threads)
            print(f"fp32 torch.mm 1024x1024, {threads} thread(s): {matmul_rate() / 1e9:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
