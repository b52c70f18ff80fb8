#!/bin/sh
# As the official image's: flags or a .conf file alone mean redis-server; started as root, it
# takes ownership of its working directory and drops to the redis user; files it makes are its
# own alone. The official binary is built with protected mode off (it runs without a config
# file, reached over the container network); Debian's is not, so it is turned off here.
set -e
case "$1" in
  -* | *.conf) set -- redis-server "$@" ;;
esac
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user redis -exec chown redis '{}' +
  exec gosu redis "$0" "$@"
fi
if [ "$(umask)" = 0022 ]; then umask 0077; fi
if [ "$1" = redis-server ]; then
  shift
  # After the config file, if one is given first; before the flags, so that theirs win.
  case "${1:-}" in
    -v | --version | -h | --help | --test-memory | --check-system) ;;
    -* | '') set -- --protected-mode no "$@" ;;
    *)
      config=$1
      shift
      set -- "$config" --protected-mode no "$@"
      ;;
  esac
  set -- redis-server "$@"
fi
exec "$@"
