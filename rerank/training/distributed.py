"""Training on several processes under ``torchrun``: which process this is, and the few collective steps
the trainer needs.

``torchrun`` sets RANK, WORLD_SIZE and LOCAL_RANK in each process it starts; without them training is
one process, as before. Under torchrun every process reads the same data and draws the same batches
(they depend on the seed and the epoch only); ``training.batch_size`` is the global batch, and each
process takes every WORLD_SIZE-th pair of it (the batch is sorted by length, so the parts are about
as long). The model is wrapped in DistributedDataParallel (gloo on CPU, NCCL on CUDA), whose gradient
average, with each process's loss scaled by WORLD_SIZE / batch_size, is the gradient of the mean
sentence log-likelihood of the whole batch: the update a single process makes, up to the order of
floating-point sums. Only process 0 validates, logs, and writes the model and the checkpoints; it
sends the validation perplexity to the others, so that every process takes the same decisions
(early stopping, learning-rate decay). Each process draws its own dropout masks; the checkpoint
holds every process's random state, so that a run resumed with as many processes continues exactly.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from rerank.errors import RerankError

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
LONG_WAIT = datetime.timedelta(days=2)  # how long the others wait while process 0 prepares a corpus


@dataclass(frozen=True)
class World:
    """The processes of a run and this one's place among them (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        """Process 0: the one that validates, logs and writes."""
        return self.rank == 0

    def share(self, indices: np.ndarray) -> tuple[np.ndarray, int]:
        """This process's pairs of a global batch and the weight of their loss (WORLD_SIZE). A batch with
        fewer pairs than processes leaves some without one: they run its first pair with weight 0, so
        that every process takes part in the gradient average."""
        part = indices[self.rank:: self.size]
        return (part, self.size) if len(part) else (indices[:1], 0)

    def sum_and_main(self, values: Sequence[float], main_only: float) -> tuple[list[float], float]:
        """``values`` summed over the processes, and process 0's ``main_only`` (its clock): one collective."""
        if not self.distributed:
            return list(values), main_only
        tensor = _for_backend(torch.tensor([*values, main_only if self.is_main else 0.0], dtype=torch.float64))
        dist.all_reduce(tensor)
        return tensor[:-1].tolist(), float(tensor[-1])

    def from_main(self, value: float) -> float:
        """Process 0's ``value``, in every process."""
        if not self.distributed:
            return value
        tensor = _for_backend(torch.tensor([value if self.is_main else 0.0], dtype=torch.float64))
        dist.broadcast(tensor, src=0)
        return float(tensor[0])

    def rng_states(self) -> list[torch.Tensor]:
        """Every process's torch random state, in rank order (on every process)."""
        state = torch.get_rng_state()
        if not self.distributed:
            return [state]
        state = _for_backend(state)
        states = [torch.empty_like(state) for _ in range(self.size)]
        dist.all_gather(states, state)
        return [s.cpu() for s in states]

    def barrier(self, group: dist.ProcessGroup | None = None) -> None:
        if self.distributed:
            dist.barrier(group=group)

    def long_wait_group(self) -> dist.ProcessGroup | None:
        """A CPU group of every process whose barrier waits :data:`LONG_WAIT`, made by all before process 0
        starts long work alone (preparing a corpus): the default group's watchdog ends a barrier after
        minutes."""
        if not self.distributed:
            return None
        return dist.new_group(backend="gloo", timeout=LONG_WAIT)


def _for_backend(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` where the process group's backend reduces it: NCCL only on this process's GPU."""
    return tensor.cuda() if dist.get_backend() == "nccl" else tensor


def world_from_env(env: Mapping[str, str] | None = None) -> World:
    """The :class:`World` that ``torchrun`` describes in the environment; one process when it does not."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return World()
    values: dict[str, int] = {}
    for name in ENV:
        text = env.get(name, "0" if name == "LOCAL_RANK" else "")
        try:
            values[name] = int(text)
        except ValueError:
            raise RerankError(f"environment variable {name}={text!r}: expected an integer, as torchrun sets "
                              "it") from None
    rank, size = values["RANK"], values["WORLD_SIZE"]
    if not 0 <= rank < size:
        raise RerankError(f"RANK={rank} with WORLD_SIZE={size}: expected 0 <= RANK < WORLD_SIZE, as torchrun "
                          "sets them")
    return World(rank, size, values["LOCAL_RANK"])


def backend(device: torch.device) -> str:
    """The collective backend for ``device``: NCCL for CUDA, gloo for the CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


@contextlib.contextmanager
def process_group(world: World, device: torch.device) -> Iterator[None]:
    """The default process group of ``world`` for the block (nothing to do for one process); torchrun's
    MASTER_ADDR and MASTER_PORT say where the processes meet."""
    if not world.distributed:
        yield
        return
    if device.type == "cuda":
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group(backend(device), rank=world.rank, world_size=world.size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def data_parallel(model: torch.nn.Module, world: World) -> torch.nn.Module:
    """``model`` wrapped for the gradient average of ``world`` (the model itself for one process); the
    wrapper starts every process from process 0's weights."""
    if not world.distributed:
        return model
    cuda = next(model.parameters()).is_cuda
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[world.local_rank] if cuda else None)
