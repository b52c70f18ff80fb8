#!/bin/sh
# As the official image's: arguments that are not a command (a flag, a script file that is not
# executable, a name not on PATH) are given to node; anything else runs as it is.
set -e
if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1")" ] || { [ -f "$1" ] && ! [ -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"
