#!/usr/bin/env bash
# Run one build command trusting the build's optional CA bundle, the BuildKit secret "ca-bundle"
# (docker build --secret id=ca-bundle,src=FILE): for pip behind a TLS-intercepting proxy.
# BuildKit mounts the secret at /run/secrets/ca-bundle for that RUN only, so it never lands in
# a layer. Without the secret the command runs unchanged.
#
# Usage: docker/with-build-ca.sh COMMAND [ARGS...]
set -euo pipefail
bundle=/run/secrets/ca-bundle
if [ -s "$bundle" ]; then
  # pip (PIP_CERT), Python's ssl and OpenSSL (SSL_CERT_FILE), requests (REQUESTS_CA_BUNDLE).
  export PIP_CERT="$bundle" SSL_CERT_FILE="$bundle" REQUESTS_CA_BUNDLE="$bundle"
fi
exec "$@"
