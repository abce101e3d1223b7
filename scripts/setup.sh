#!/usr/bin/env bash
# Prepare this machine for dokimi's docker tests: a running docker daemon and the offline base image.
# The script itself ships inside the package (an installed dokimi runs it as `dokimi setup`).
set -euo pipefail
exec bash "$(dirname "$0")/../src/dokimi/setup/base_image.sh" "$@"
