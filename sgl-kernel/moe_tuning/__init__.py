"""CPU-side groundwork for tuning SGLang 0.5.17's INT4 Triton MoE kernel for Kimi-K2.5.

``shapes`` (GEMM shapes and config file names), ``search_space`` (candidate
kernel configs and their filters), ``config_file`` (SGLang's config JSON:
read, validate, write). Nothing here needs a GPU, and nothing here has run on one.
"""
