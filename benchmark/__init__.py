"""The verify/e2e benchmark harness of sglang-fastpath (see benchmark/README.md).

Sub-packages, one a part:

* ``driver``: ``python benchmark/run.py`` (= ``python -m benchmark.run``): the plan of jobs,
  one subprocess a job, rounds folded into ``results.json``, the summary, the regression guard,
  the plots and ``results/INDEX.md``. Plain Python, no SGLang.
* ``worker``: ``python -m benchmark.worker``, the process the driver starts per job with the
  variant's site on PYTHONPATH; the only modules that import SGLang (micro steps, e2e engines).
* ``tools``: analyses run on their own (profiler traces, the scheduler sampler's counts,
  collective costs, the TP projection, the verify-attention kernel bench).
* ``core``: what all three share: the job spec, the bandwidth floor, errors, argument types.
* ``soak``: the server soak and fault harness (``python -m benchmark.soak``).

The ``*.py`` files beside this one are thin shims that keep the old script paths working
(``script_shim.py``).
"""
