#!/usr/bin/env bash
# The test command (npm test): unit tests beside the code, integration tests in test/,
# against the real PostgreSQL, Redis and NATS (started when down).
set -euo pipefail
cd "$(dirname "$0")/.."
bash test/ensure-services.sh
mapfile -t files < <(find internal test deploy bench -name '*.test.ts' -not -path '*/node_modules/*' 2>/dev/null | sort)
# The longest files first (each 35-70 s on this machine kind; most wait on a stopped service,
# a refresh round or a browser): started first, the short files fill the gaps they leave.
SLOW=(internal/export/property-rollups.test.ts test/tenant-flood.test.ts test/ingest-faults.test.ts
  test/faults-reads.test.ts test/dashboard-browser.test.ts test/faults-postgres.test.ts test/readyz-worker.test.ts
  test/faults-nats-cluster.test.ts test/timescale.test.ts internal/insights/filtered-rollups-metrics.test.ts
  internal/export/column-count.test.ts test/timescale-parity.test.ts internal/insights/rollups.test.ts)
ordered=()
for f in "${SLOW[@]}"; do [[ " ${files[*]} " == *" $f "* ]] && ordered+=("$f"); done
for f in "${files[@]}"; do [[ " ${SLOW[*]} " == *" $f "* ]] || ordered+=("$f"); done
files=("${ordered[@]}")
if [ "$#" -gt 0 ]; then files=("$@"); fi
# Four files at a time on two cores: the fault tests (a service stopped for seconds, a worker
# killed and replaced) and the rollup tests (refresh rounds) mostly wait, so the suite used
# about half the machine's CPU at three; the README has the timing.
# TEST_CONCURRENCY overrides.
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-4}" --test-timeout=600000 "${files[@]}"
