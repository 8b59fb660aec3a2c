# session 26 device call C (nvidia-h200, fresh host), after the kimi16 kvb8 e2e (see ../20261204-0106-h200-tp1-kimi16-miss65-kvonly-vs-kvb8/); slim bundle of commit 0d37f73 + the sm90 JIT cache, with benchmark/tools/attn_verify_bench.py's --decode-sweep (commit after 0d37f73); carry .carry .devrun; device_tree.sh hide/restore. The lines that ran this folder:
# bs 1/8/32, max_running_requests 256, plain decode in the same process, greedy parity. Then (issue 18) patch 0035's
# plain decode swept over tiles and split counts (attn_verify_bench --decode-sweep) with what is left.
set -uo pipefail
[ -d /tmp/site-fork/sglang ] && export FASTPATH_PREFLIGHT_DONE=1
