#!/bin/sh
# The entrypoint of docker-compose.yml's Redis servers: writes the ACL file from the passwords in
# the environment (render-acl.sh: only their SHA-256 reaches the file), then starts Redis through
# the official image's entrypoint, loading that file. compose runs it as the redis user; started
# as root, it hands the file to that user, as the image's entrypoint then drops to it.
set -eu
umask 077
here=$(dirname "$0")
sh "$here/render-acl.sh" "$here/users.acl.template" > /tmp/users.acl
if [ "$(id -u)" = 0 ]; then chown redis:redis /tmp/users.acl; fi
exec docker-entrypoint.sh "$@" --aclfile /tmp/users.acl
