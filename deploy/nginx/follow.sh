#!/bin/sh
# The compose fleet's balancer: nginx in the foreground, reloaded when the address of one of its upstream names
# (the arguments: the gateway and API services) changes, so a recreated container is followed. nginx resolves the
# names of deploy/nginx/fleet.conf at start and at each reload only: `resolve` on a stream upstream server needs
# nginx 1.27.3, and the configuration is the one tested with Debian 12's nginx 1.22. A reload ends nginx's UDP flows:
# CID devices keep their sessions (the CID finds the node); a device without CID makes a new handshake.
set -u
addresses() {
  for name in "$@"; do
    a=$(getent hosts "$name" | cut -d' ' -f1 | sort | tr '\n' ',')
    [ -n "$a" ] || return 1 # a name that does not resolve (its container is being recreated): wait, never reload
    printf '%s=%s ' "$name" "$a"
  done
}
nginx -g 'daemon off;' &
pid=$!
trap 'kill -QUIT "$pid"' TERM INT
last=$(addresses "$@")
while kill -0 "$pid" 2>/dev/null; do
  sleep "${FOLLOW_INTERVAL:-5}" &
  wait $!
  now=$(addresses "$@") || continue
  if [ "$now" != "$last" ]; then
    echo "follow.sh: upstream addresses changed ($last -> $now): nginx -s reload"
    nginx -s reload && last=$now
  fi
done
wait "$pid"
