#!/bin/sh
# As the official image's: flags alone mean haproxy; haproxy runs as master and worker (-W),
# in the foreground (-db), so that it is the container's process and gets its stop signal.
set -e
if [ "${1#-}" != "$1" ]; then
  set -- haproxy "$@"
fi
if [ "$1" = haproxy ]; then
  shift
  set -- haproxy -W -db "$@"
fi
exec "$@"
