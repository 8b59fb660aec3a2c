"""The benchmark driver: ``run`` (the CLI) -> ``plan`` (typed jobs) -> ``orchestrate`` (one
worker subprocess a job) -> ``collect``/``rounds``/``schema`` (``results.json``) -> ``summary``,
``compare`` (the regression guard), ``plot``, ``artifacts``/``envinfo`` (``command.txt``,
``env.json``), ``selftest``; ``results_index`` writes ``benchmark/results/INDEX.md``.
Plain Python; the driver never imports SGLang."""
