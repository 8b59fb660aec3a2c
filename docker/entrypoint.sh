#!/usr/bin/env bash
# The image's entrypoint.
# No arguments, or a first argument starting with "-": serve, i.e.
#   python3 -m sglang.launch_server --host $SGLANG_FASTPATH_HOST --port $SGLANG_FASTPATH_PORT ARGS...
# (defaults 0.0.0.0 and 30000; change the port with -e SGLANG_FASTPATH_PORT=N, not --port, so that
# the HEALTHCHECK probes the same port). Anything else runs as a command, e.g.
#   sglang-fastpath models tiny --out /models/tiny   or   bash
set -euo pipefail
if [ $# -eq 0 ] || [ "${1#-}" != "$1" ]; then
  exec python3 -m sglang.launch_server \
    --host "${SGLANG_FASTPATH_HOST:-0.0.0.0}" --port "${SGLANG_FASTPATH_PORT:-30000}" "$@"
fi
exec "$@"
