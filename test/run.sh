#!/usr/bin/env bash
# The test command (npm test): unit tests beside the code, integration tests in test/,
# against the real PostgreSQL, Redis and NATS (started when down).
set -euo pipefail
cd "$(dirname "$0")/.."
bash test/ensure-services.sh
mapfile -t files < <(find internal test deploy bench -name '*.test.ts' -not -path '*/node_modules/*' 2>/dev/null | sort)
if [ "$#" -gt 0 ]; then files=("$@"); fi
# Three files at a time on two cores: the fault tests (a service stopped for seconds, a worker
# killed and replaced) mostly wait, so a third file uses what they leave; on this machine kind
# the suite took 8.2 minutes at 3 and 9.8 at 2 (TEST_CONCURRENCY overrides).
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-3}" --test-timeout=600000 "${files[@]}"
