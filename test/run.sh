#!/usr/bin/env bash
# The test command (npm test): unit tests beside the code, integration tests in test/,
# against the real PostgreSQL, Redis and NATS (started when down).
set -euo pipefail
cd "$(dirname "$0")/.."
bash test/ensure-services.sh
mapfile -t files < <(find internal test deploy bench -name '*.test.ts' -not -path '*/node_modules/*' 2>/dev/null | sort)
if [ "$#" -gt 0 ]; then files=("$@"); fi
exec node --import tsx --test --test-concurrency=2 --test-timeout=600000 "${files[@]}"
