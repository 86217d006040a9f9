"""The allocator setting (depthprune/allocator.py): large tensors reuse freed heap memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from depthprune import allocator
from depthprune.cli import main

PROBE = """
import json, torch
from depthprune import allocator
kept = allocator.keep_freed_memory()
before = allocator.mallinfo()
x = torch.ones(16_000_000)  # 64 MB: above glibc's largest mmap threshold (32 MiB)
during = allocator.mallinfo()
del x
after = allocator.mallinfo()
print(json.dumps({"kept": kept, "mapped": during.hblkhd - before.hblkhd, "free_heap": after.fordblks}))
"""

needs_glibc = pytest.mark.skipif(allocator.mallinfo() is None, reason="glibc >= 2.33 only")


def _probe(setting: str) -> dict:
    env = {**os.environ, allocator.ENV_VAR: setting}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_glibc
def test_keep_serves_a_large_tensor_from_the_heap_and_keeps_it_after_free():
    kept = _probe("keep")
    assert kept["kept"] is True
    assert kept["mapped"] == 0  # not a fresh mmap
    assert kept["free_heap"] >= 64_000_000  # freed into the heap, ready for the next one


@needs_glibc
def test_system_setting_leaves_glibc_as_it_is():
    system = _probe("system")
    assert system["kept"] is False
    assert system["mapped"] >= 64_000_000  # glibc's own behaviour: its own mapping, unmapped on free


def test_a_bad_setting_is_an_error_naming_the_variable(monkeypatch, caplog):
    monkeypatch.setenv(allocator.ENV_VAR, "jemalloc")
    with pytest.raises(ValueError, match="DEPTHPRUNE_MALLOC='jemalloc'"):
        allocator.keep_freed_memory()
    assert main(["timing", "stages", "--benchmarks-dir", "no-such-folder"]) == 2
    assert "DEPTHPRUNE_MALLOC" in caplog.text


FRAGMENTS = """
import json, torch
from depthprune import allocator
allocator.keep_freed_memory()
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
held = [torch.ones(250_000 * (i % 7 + 1)) for i in range(400)]  # 1 to 7 MB each, about 1.6 GB
del held[::2]  # every other one freed: about 0.8 GB of free heap between live tensors
before = resident()
first = allocator.give_back_free_memory(limit=100_000_000)
after = resident()
second = allocator.give_back_free_memory(limit=100_000_000)  # no new free memory since
print(json.dumps({"first": first, "second": second, "before": before, "after": after}))
"""


@needs_glibc
def test_free_heap_past_the_limit_goes_back_to_the_kernel_once():
    env = {**os.environ, allocator.ENV_VAR: "keep"}
    done = subprocess.run([sys.executable, "-c", FRAGMENTS], env=env, capture_output=True, text=True, check=True)
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["first"] >= 500_000_000
    assert probe["before"] - probe["after"] >= 400_000_000  # the free pages left the process
    assert probe["second"] == 0


def test_nothing_is_given_back_unless_freed_memory_is_kept(monkeypatch):
    monkeypatch.setattr(allocator, "_in_force", False)
    assert allocator.give_back_free_memory(limit=0) == 0
