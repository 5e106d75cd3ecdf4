# Why this exists: SGLang 0.5.23 imports names from its kernel package `sgl_kernel` at module level even on its
# torch-native CPU path (for example assign_req_to_token_pool_cpu in mem_cache/allocation.py), and the registry has
# only CUDA builds of that package (`sgl-kernel`, `sglang-kernel`: ImportError libnvrtc.so.12) and no source.
# e2e.real.sglang.install() copies this file into the SGLang venv as the package `sgl_kernel`.
# What it implements: assign_req_to_token_pool_cpu in plain PyTorch, the one kernel 0.5.23 calls on this path (the
# scheduler's KV slot bookkeeping for every batch). Every other name imports, so SGLang's module-level imports work,
# and raises NotImplementedError naming itself when called. It covers only what 0.5.23 calls: SGLang is pinned.
"""A pure-PyTorch stand-in for SGLang's CPU kernel package, enough for SGLang 0.5.23's torch-native CPU path."""

import torch

__version__ = "0.0.0+fastgen-stand-in"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    *_pool_len_and_batch_bound,
) -> None:
    """req_to_token[req_pool_indices[i], start_offset[i]:end_offset[i]] = the i-th slice of out_cache_loc, the
    slices laid end to end in request order (the compiled kernel's contract; its trailing arguments, the pool length
    and a batch-size bound, only size its loops)."""
    taken = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist()):
        length = end - start
        req_to_token[row, start:end] = out_cache_loc[taken : taken + length].to(req_to_token.dtype)
        taken += length


def __getattr__(name: str):
    if name.startswith("__"):  # __all__, __path__ lookups and the like: not kernels
        raise AttributeError(name)

    def unavailable(*args, **kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not implemented by fastgen's CPU stand-in "
            f"(e2e/real/stand_ins/sgl_kernel): SGLang called a kernel that 0.5.23 did not call "
            f"on this path"
        )

    unavailable.__name__ = name
    return unavailable
