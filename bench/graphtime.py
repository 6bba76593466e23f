"""graphtime.py -- how the bench scripts time GPU work (METHOD.md): calls
captured back to back in one CUDA graph, the graph replayed between CUDA
events, per call. Each script keeps its own choice of how many calls a
graph holds (its calibration) and of the statistic it reports.

    import graphtime
    times = graphtime.replay_us(lambda i: plan.run(...), iters, reps, stream)
"""
import torch


def capture(call, iters, stream=None, warm=1):
    """call(i) for i in 0 .. iters-1 captured into one CUDA graph (on
    stream, or torch's own capture stream when None), then `warm` untimed
    replays (the first uploads the graph): the graph, for replay_times."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for i in range(iters):
            call(i)
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    return g


def replay_times(g, iters, reps):
    """`reps` replays of graph g (captured with `iters` calls), each between
    two events on the current stream: their times in microseconds per call."""
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0 / iters)
    return times


def replay_us(call, iters, reps, stream=None, warm=1):
    """capture() then replay_times(): the list of `reps` replays' times in
    microseconds per call; the graph is released."""
    g = capture(call, iters, stream, warm)
    times = replay_times(g, iters, reps)
    del g
    return times
