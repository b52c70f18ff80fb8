#!/bin/sh
# Prints the Redis ACL file (users.acl.template, or the template given as $1) with the SHA-256 of
# ITEMS_LIST_REDIS_PASSWORD and FORGE_AGGREGATOR_REDIS_PASSWORD filled in: only their hashes
# reach the file. Refuses to print anything when either password is unset or empty.
# docker-compose.yml runs it in each Redis container at start; for Kubernetes, run it once to make
# the Secret (docs/kubernetes.md, "Apply"). POSIX sh and coreutils only: the official redis image has both.
set -eu
template=${1:-$(dirname "$0")/users.acl.template}
: "${ITEMS_LIST_REDIS_PASSWORD:?is not set: the items-list user needs a password}"
: "${FORGE_AGGREGATOR_REDIS_PASSWORD:?is not set: the forge-aggregator user needs a password}"
sha256() { printf '%s' "$1" | sha256sum | cut -d ' ' -f 1; }
items_list=$(sha256 "$ITEMS_LIST_REDIS_PASSWORD")
forge_aggregator=$(sha256 "$FORGE_AGGREGATOR_REDIS_PASSWORD")
grep -v -e '^#' -e '^[[:space:]]*$' "$template" |
  sed -e "s/{{ITEMS_LIST_PASSWORD_SHA256}}/$items_list/" -e "s/{{FORGE_AGGREGATOR_PASSWORD_SHA256}}/$forge_aggregator/"
