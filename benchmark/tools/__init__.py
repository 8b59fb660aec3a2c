"""Analyses that run on their own, on a run's outputs or on one GPU: ``trace_summary`` (GPU time
by kernel category in torch-profiler traces), ``cycle_phases`` + ``cycle_timeline`` (a decode step
or EAGLE-3 cycle cut into phases, with a timeline PNG), ``rank_skew`` (transfer vs waiting in
collectives), ``pysample`` (the scheduler sampler's call tree), ``collective_cost`` (one
all-reduce's cost per method), ``project_tp`` (the TP=N projection), ``attn_verify_bench`` (the
verify-attention kernel check and timing). The worker reuses ``trace_summary``."""
