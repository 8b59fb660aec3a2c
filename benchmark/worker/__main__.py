"""``python -m benchmark.worker --spec JOB.spec.json --out JOB.jsonl``: one job (``dispatch.main``)."""

from benchmark.worker.dispatch import main

if __name__ == "__main__":  # required: SGLang and the TP ranks start processes with spawn
    main()
