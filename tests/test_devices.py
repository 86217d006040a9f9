"""Device decisions with the CUDA queries faked (devices.py): the state cache's budget, the
synchronisation, the cache release; the budget arithmetic of an 8B model on 80 GB and 141 GB GPUs."""

from __future__ import annotations

import torch

from depthprune import devices
from depthprune.engine.states import default_state_budget

GB, GIB = 10**9, 1 << 30
LLAMA3_8B_PARAMS = 8_030_261_248  # bundled config.json (models/configs), counted on the meta device


def fake_free(free: int, total: int):
    calls = []

    def query(device):
        calls.append(torch.device(device))
        return free, total

    return query, calls


def test_cuda_budget_is_half_the_free_memory_after_the_model():
    weights = LLAMA3_8B_PARAMS * 2  # bfloat16
    for total, expected_gib in ((80 * GB, 29.77), (141 * GB, 58.18)):
        query, calls = fake_free(total - weights, total)
        budget = devices.state_budget(torch.device("cuda:0"), cuda_memory=query)
        assert calls == [torch.device("cuda:0")]
        assert budget == (total - weights) // 2
        assert abs(budget / GIB - expected_gib) < 0.01
        # the paper's 64 x 2048 calibration: one cached bfloat16 state is 1 GiB
        state = 64 * 2048 * 4096 * 2
        assert state == GIB
        assert budget // state == int(expected_gib)  # 29 states on an 80 GB GPU, 58 on 141 GB
    query, _ = fake_free(10 * GIB, 80 * GB)
    assert default_state_budget(torch.device("cuda"), cuda_memory=query) == 5 * GIB


def test_cpu_budget_is_an_eighth_of_ram_at_most_8_gib():
    assert devices.state_budget(torch.device("cpu"), cpu_memory=lambda: 16 * GIB) == 2 * GIB
    assert devices.state_budget(torch.device("cpu"), cpu_memory=lambda: 256 * GIB) == 8 * GIB


def test_synchronise_and_release_only_on_cuda():
    seen = []
    devices.synchronize(torch.device("cpu"), cuda_synchronize=seen.append)
    devices.release_cached_memory(torch.device("cpu"), empty_cache=lambda: seen.append("empty"))
    assert seen == []
    devices.synchronize(torch.device("cuda:1"), cuda_synchronize=seen.append)
    devices.release_cached_memory(torch.device("cuda:1"), empty_cache=lambda: seen.append("empty"))
    assert seen == [torch.device("cuda:1"), "empty"]


def test_state_device_option():
    assert devices.state_device(torch.device("cuda:0")) == torch.device("cuda:0")
    assert devices.state_device(torch.device("cuda:0"), "cpu") == torch.device("cpu")
