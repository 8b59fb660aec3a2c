"""On the GPU host: what is installed and whether it fits (``doctor``, ``memory_split``,
``moe_config``: SGLang's fused-MoE config for a model), the first JIT build done ahead
(``jit_warm``), and the embedded tiny model served end to end (``demo``)."""
