"""A torch.distributed job on Gloo, as a multi-node engine starts its CPU-side group: every rank
joins rank 0's store (env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), the group connects
its full mesh, one all_reduce runs. Run in the engine image on each node (docker run --network
host), so its Python and torch are the image's; GLOO_JOB_TIMEOUT_S bounds the wait (default 30).
"""

import datetime
import os

import torch
import torch.distributed as dist

timeout = datetime.timedelta(seconds=float(os.environ.get("GLOO_JOB_TIMEOUT_S", "30")))
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(
    f"torch {torch.__version__}: rank {rank} of {world} joins {os.environ['MASTER_ADDR']}",
    flush=True,
)
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
t = torch.ones(4)
dist.all_reduce(t)
print(f"rank {rank}: all_reduce {t.tolist()}", flush=True)
dist.destroy_process_group()
