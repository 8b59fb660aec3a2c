"""Warp-specialized (Gluon) MLA verify attention stage 1 for sm_90: see README.md."""
