"""The offline bundle for an air-gapped GPU host: what the host already has (``host_manifest``),
the profiles full and slim (``profiles``), pip pointed at the host (``host_pip``), the wheels the
host lacks (``plan``), and the folder itself with its installer and checksums (``build``)."""
