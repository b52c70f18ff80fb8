#!/bin/sh
# The entrypoint of docker-compose.yml's Redis servers: writes the ACL file from the passwords in
# the environment (render-acl.sh: only their SHA-256 reaches the file), then starts Redis as the
# official image does (its docker-entrypoint.sh drops to the redis user), loading that file.
set -eu
umask 077
here=$(dirname "$0")
sh "$here/render-acl.sh" "$here/users.acl.template" > /tmp/users.acl
if [ "$(id -u)" = 0 ]; then chown redis:redis /tmp/users.acl; fi
exec docker-entrypoint.sh "$@" --aclfile /tmp/users.acl
