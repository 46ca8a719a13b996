"""loom as a torch.distributed backend.

Importing this package registers the backend "loom"::

    import torch.distributed as dist
    import loom_torch  # optional: torch also finds it through its entry point
    dist.init_process_group("loom")

CPU tensors run on loom's host path (shared memory between the processes of a host, TCP
between hosts). CUDA tensors are refused until loom's CUDA communicators are available.
"""

from datetime import timedelta

import torch  # noqa: F401  (loads libtorch, which _C links against)
import torch.distributed as dist

from . import _C

__all__ = ["register", "loom_version"]

_NAME = "loom"


def loom_version() -> int:
    """LOOM_VERSION_CODE of the loaded libloom (major * 10000 + minor * 100 + patch)."""
    return _C.loom_version()


def _create(dist_opts, backend_opts=None):
    """The extended-API creator torch calls for every group that uses "loom"."""
    timeout = dist_opts.timeout
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    parent = getattr(dist_opts, "split_from", None)
    if isinstance(parent, _C.LoomBackend):
        # torch splits new groups from a default group bound to a device: every rank of the
        # parent takes part (non-members through perform_nocolor_split).
        return _C.split_backend(
            parent,
            dist_opts.store,
            seconds,
            dist_opts.group_id,
            [int(r) for r in dist_opts.global_ranks_in_group],
        )
    return _C.create_backend(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        seconds,
        dist_opts.group_id,
        list(dist_opts.global_ranks_in_group),
    )


def register() -> None:
    """Registers "loom" with torch.distributed (done on import; calling it again is harmless).

    This is also the entry point of the group ``torch.distributed.backends``.
    """
    if _NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(_NAME, _create, extended_api=True, devices=["cpu", "cuda"])


register()
