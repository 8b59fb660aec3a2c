"""The benchmark's worker process, started by the driver once per job with the variant's site
on PYTHONPATH (``python -m benchmark.worker``): ``dispatch`` checks where SGLang came from and runs
the job's ``micro`` (ModelRunner decode/verify steps: ``runner_states``, ``step_inputs``, ``tree``,
``timing``) or ``e2e`` (``sglang.Engine``, speculation off then on: ``tokens``, ``engine_probes``)
measurement, writing JSON lines through ``sink``. ``pysample_site/`` is put on the engine's
scheduler processes' PYTHONPATH to sample their loop. The only modules that import SGLang."""
