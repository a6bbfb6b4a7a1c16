#!/bin/bash
# The image's health check, without curl or wget (debian:bookworm-slim has neither, and no
# Casement binary has a probe subcommand): one HTTP/1.0 GET over bash's /dev/tcp.
#   CASEMENT_HEALTH_PORT  default 8080 (casement, casement-query); 9464 for casement-indexer
#   CASEMENT_HEALTH_PATH  default /healthz; /readyz for "ready to serve"
# Exit 0 on a 200 answer, 1 otherwise (the status line goes to stderr: `docker inspect` shows it).
set -eu
port="${CASEMENT_HEALTH_PORT:-8080}"
path="${CASEMENT_HEALTH_PATH:-/healthz}"
exec 3<>"/dev/tcp/127.0.0.1/${port}"
printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$path" >&3
status=""
IFS= read -r -t 5 status <&3 || true
exec 3<&-
case "$status" in
  "HTTP/1."[01]" 200"*) exit 0 ;;
  *) echo "GET ${path} on port ${port}: ${status%$'\r'}" >&2; exit 1 ;;
esac
