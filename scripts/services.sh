#!/usr/bin/env bash
# `pnpm services`: makes Postgres (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer on this machine.
# Starts them when installed but stopped; installs them with apt-get (Debian) when absent.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

apt_install() {
  echo "services: installing $* with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # name check-fn
  for _ in $(seq 1 60); do "$2" && return 0; sleep 0.5; done
  echo "services: $1 did not come up" >&2; return 1
}

if ! redis_up; then
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  echo "services: starting Redis"
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no
  wait_for Redis redis_up
fi
echo "services: Redis answers on 127.0.0.1:6379"

if ! pg_up; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then apt_install postgresql; fi
  version=$(ls /etc/postgresql | sort -V | tail -1)
  echo "services: starting PostgreSQL $version"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || $SUDO pg_ctlcluster "$version" main start
  wait_for PostgreSQL pg_up
fi
# The project's contract: user postgres, trust on 127.0.0.1. A fresh Debian cluster asks for a
# password over TCP, so allow trust for local connections when that is not yet the case.
if ! psql -h 127.0.0.1 -U postgres -tAc 'select 1' >/dev/null 2>&1; then
  hba=$($SUDO -u postgres psql -tAc 'show hba_file' 2>/dev/null || su postgres -c "psql -tAc 'show hba_file'")
  echo "services: allowing trust authentication on 127.0.0.1 in $hba"
  $SUDO sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/; s/^(host\s+all\s+all\s+::1\/128\s+)\S+/\1trust/' "$hba"
  $SUDO -u postgres psql -tAc 'select pg_reload_conf()' >/dev/null 2>&1 || su postgres -c "psql -tAc 'select pg_reload_conf()'" >/dev/null
  sleep 1
fi
psql -h 127.0.0.1 -U postgres -tAc 'select 1' >/dev/null
echo "services: PostgreSQL answers on 127.0.0.1:5432 (user postgres)"
