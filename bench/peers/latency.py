"""The PyTorch peers' latency loop: `warmup` calls, then `iters` timed ones, under no_grad and `context`
(e.g. bf16 autocast); the median and p90 in ms."""
import contextlib
import statistics
import time

import torch


def latency_ms(call, iters, warmup, context=contextlib.nullcontext):
    times = []
    with torch.no_grad(), context():
        for _ in range(warmup):
            call()
        for _ in range(iters):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
    times.sort()
    p90 = times[min(len(times) - 1, max(0, -(-9 * len(times) // 10) - 1))]
    return {"median": statistics.median(times) * 1e3, "p90": p90 * 1e3}
