"""The verify/e2e benchmark harness of sglang-fastpath.

``python benchmark/run.py`` is the entry point (see benchmark/README.md). Modules
that import SGLang (worker, micro, runner_states, step_inputs, e2e, timing) run only
inside the per-variant subprocesses; everything else is plain Python.
"""
