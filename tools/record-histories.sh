#!/usr/bin/env bash
# Records the Temporal history corpus of this release (test/support/history-corpus.ts): runs the
# live and time-skipping suites with RECORD_HISTORIES set, one folder per release. Run it before a
# release and commit the folder; CI replays every history in the corpus with the code of the day.
set -euo pipefail
cd "$(dirname "$0")/.."
label="${1:-v$(node -p "require('./package.json').version")-$(date -u +%Y-%m-%d)}"
export RECORD_HISTORIES="test/fixtures/temporal-histories/$label"
echo "[record-histories] recording into $RECORD_HISTORIES"
npx mocha test/workflows/temporal-live*.test.ts test/workflows/temporal-time-skipping.test.ts
echo "[record-histories] $(ls "$RECORD_HISTORIES" | wc -l) histories in $RECORD_HISTORIES"
