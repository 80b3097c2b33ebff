#!/usr/bin/env bash
# Starts PostgreSQL, Redis and NATS (JetStream) when one is down, with the commands this
# machine kind documents, and waits until each answers.
set -u
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() { for _ in $(seq 1 60); do up "$2" && return 0; sleep 0.5; done; echo "ensure-services: $1 did not come up on port $2" >&2; return 1; }

if ! up 5432; then
  echo "ensure-services: starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  wait_for PostgreSQL 5432 || exit 1
fi
if ! up 6379; then
  echo "ensure-services: starting Redis" >&2
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis 6379 || exit 1
fi
if ! up 4222; then
  echo "ensure-services: starting NATS" >&2
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS 4222 || exit 1
fi
# The hll extension (package postgresql-<major>-hll) for the unique-visitor sketches
# (sql/008_rollup_visitors.sql; internal/insights/rollups.test.ts needs it). Installed
# quietly when missing and we may (root with apt-get, e.g. CI); otherwise a warning only:
# Tidemark itself then counts unique visitors exactly.
pg_major="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1)"
pg_major="${pg_major:-15}"
if [ ! -f "/usr/share/postgresql/$pg_major/extension/hll.control" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure-services: installing postgresql-$pg_major-hll" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$pg_major-hll"; } >/dev/null 2>&1 \
      || echo "ensure-services: could not install postgresql-$pg_major-hll" >&2
  else
    echo "ensure-services: postgresql-$pg_major-hll is not installed (apt-get install postgresql-$pg_major-hll as root)" >&2
  fi
fi
exit 0
