"""Which process this is under torchrun, and its share of a global batch; one process passes values through."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rerank.errors import RerankError
from rerank.training.distributed import World, backend, world_from_env


@pytest.mark.parametrize(("size", "indices", "shares"), [
    (2, [5, 3, 9], [([5, 9], 2), ([3], 2)]),
    (3, [4], [([4], 3), ([4], 0), ([4], 0)]),  # fewer pairs than processes: stand-ins of weight 0
    (1, [1, 2], [([1, 2], 1)]),
])
def test_each_process_takes_a_disjoint_share(size: int, indices: list[int],
                                             shares: list[tuple[list[int], int]]) -> None:
    got = [World(rank, size).share(np.array(indices)) for rank in range(size)]
    assert [(part.tolist(), weight) for part, weight in got] == shares


def test_the_world_comes_from_torchruns_environment() -> None:
    assert world_from_env({}) == World()
    assert world_from_env({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == World(1, 4, 1)
    for env in ({"RANK": "x", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2"}):
        with pytest.raises(RerankError, match="RANK"):
            world_from_env(env)


def test_one_process_is_not_distributed_and_passes_values_through() -> None:
    world = World()
    assert not world.distributed and world.is_main and not World(1, 2).is_main and World(1, 2).distributed
    assert world.sum_and_main([1.0, 2.5], 7.0) == ([1.0, 2.5], 7.0) and world.from_main(3.0) == 3.0
    assert len(world.rng_states()) == 1 and torch.equal(world.rng_states()[0], torch.get_rng_state())
    assert world.long_wait_group() is None
    world.barrier()
    assert backend(torch.device("cpu")) == "gloo" and backend(torch.device("cuda", 1)) == "nccl"


def test_the_environments_errors_name_the_variable() -> None:
    with pytest.raises(RerankError, match=r"environment variable RANK='x': expected an integer, as torchrun sets"):
        world_from_env({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(RerankError, match=r"RANK=2 with WORLD_SIZE=2: expected 0 <= RANK < WORLD_SIZE"):
        world_from_env({"RANK": "2", "WORLD_SIZE": "2"})
    assert world_from_env({"RANK": "0", "WORLD_SIZE": "2"}) == World(0, 2, 0)  # LOCAL_RANK: 0 unless set
