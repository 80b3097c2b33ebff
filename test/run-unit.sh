#!/usr/bin/env bash
# The unit tier (npm run test:unit): the tests beside the code that need no service, i.e.
# that use none of test/support's databases, apps or servers and open no PostgreSQL, Redis or
# NATS connection. Seconds, no PostgreSQL, Redis or NATS needed; `npm test` runs these too.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICES="test/support/(sql-db|harness|timescale|private-services|export-server)|from 'ioredis'|transport-node|createPool\(|new pg\.(Pool|Client)"
mapfile -t files < <(find internal deploy -name '*.test.ts' -not -path '*/node_modules/*' | sort | while read -r f; do grep -qE "$SERVICES" "$f" || echo "$f"; done)
if [ "$#" -gt 0 ]; then files=("$@"); fi
exec node --import tsx --test --test-concurrency=2 "${files[@]}"
