"""Soak and fault harness for a SGLang server (issue 14): ``python -m benchmark.soak``.

Plain Python (standard library only), no SGLang import: it starts the real
server as a subprocess or attaches to one, and talks to it over loopback HTTP.
Modules: ``http_client`` (asyncio HTTP/1.1 + SSE), ``workload`` (valid
traffic and how replies are judged), ``bad_inputs`` (the bad-input
catalogue), ``server`` (launch/attach, process tree, metrics), ``soak`` (one
run), ``report`` (soak.json), ``__main__`` (the CLI). See README.md.
"""
