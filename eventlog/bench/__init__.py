"""The benchmark suite: eventlog against the limit (raw engines) and its peers, in one run.

`eventlog bench` (see `eventlog.bench.runner`) measures every figure on the same seeded
conversation (`eventlog.bench.workload`). Peers are optional imports (`agent-eventlog[benchmarks]`).
"""
