#!/usr/bin/env python3
"""The image's HEALTHCHECK: exit 0 when SGLang's ``/health`` answers 200, else 1.

Probes ``http://127.0.0.1:$SGLANG_FASTPATH_PORT/health`` (default port 30000), with
no proxy and a timeout of ``$SGLANG_FASTPATH_HEALTH_TIMEOUT`` seconds (default 8).
SGLang answers 503 while it loads the model and during shutdown, and exempts
``/health`` from ``--api-key``. Standard library only: it runs on any base image.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def probe(port: str, timeout: float) -> tuple[bool, str]:
    url = f"http://127.0.0.1:{port}/health"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status == 200, f"{url}: {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, f"{url}: {exc}"


def main() -> int:
    port = os.environ.get("SGLANG_FASTPATH_PORT", "30000")
    try:
        timeout = float(os.environ.get("SGLANG_FASTPATH_HEALTH_TIMEOUT", "8"))
    except ValueError:
        print("SGLANG_FASTPATH_HEALTH_TIMEOUT is not a number of seconds", file=sys.stderr)
        return 1
    ok, detail = probe(port, timeout)
    print(detail)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
