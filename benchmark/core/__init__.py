"""What the driver, the worker and the tools share: the job spec (``spec``), the bandwidth
floor of a step (``floor``), ``BenchError`` (``errors``) and argument types (``argtypes``).
Plain Python; nothing here imports SGLang."""
