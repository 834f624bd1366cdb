"""Lab-only stand-in for ``sgl_kernel``, the CPU build of SGLang's kernel library.

PyPI ships sglang-kernel for CUDA only (its ``import sgl_kernel`` needs libcuda), and the CPU
build exists only as source in SGLang's repository. lab/prepare.yml puts this folder on the
real-SGLang lab host (and on no host outside the lab) and the service's PYTHONPATH puts it
ahead of the installed package. Everything else the host runs is the real, hash-locked release.

What SGLang 0.5.23's CPU path (SGLANG_USE_CPU_ENGINE=1) calls for a dense Llama model is written
here in plain torch; any other kernel is resolved by name so that SGLang's imports succeed, and
raises NotImplementedError, naming itself, when it is called.
"""

LAB_STANDIN = True  # the audit and the lab tests look for this to name the stand-in


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len):
    """Write each request's new KV-cache slots into its row of the request-to-token table.

    SGLang 0.5.23's Triton kernel of the same job (sglang/srt/mem_cache/allocation.py:692-723):
    request i takes the next ``end_offset[i] - start_offset[i]`` entries of ``out_cache_loc``, in
    order, into ``req_to_token[req_pool_indices[i], start_offset[i]:end_offset[i]]``.
    ``pool_len`` is the table's row length (the kernel's pointer stride), unused with 2-D indexing.
    """
    del pool_len
    taken = 0
    for i in range(len(req_pool_indices)):
        start, end = int(start_offset[i]), int(end_offset[i])
        req_to_token[int(req_pool_indices[i]), start:end] = out_cache_loc[taken:taken + end - start]
        taken += end - start


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def not_in_standin(*_args, **_kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not in sglang-fleet's lab stand-in (lab/real_sglang/sgl_kernel): "
            "it implements only what SGLang's CPU path calls for a dense Llama model. Serve a "
            "model and flags that do not need it, or install SGLang's real CPU kernel build.")

    not_in_standin.__name__ = name
    return not_in_standin
