"""Page-64 MLA verify attention with TMA tile loads (issue 18 prototype): ``verify_tma.verify_attention_tma_fwd``."""
