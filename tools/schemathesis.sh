#!/usr/bin/env bash
# CI's API fuzzing step: schemathesis (installed by tools/install.sh into .tools/venv) against a
# running service, from the service's own OpenAPI document (GET /api/v1/openapi.json).
#
# Starts `npm start` on a fresh temporary DATA_DIR (embedded PostgreSQL, a free port, the dev inbox,
# no SMTP listeners), so the first start makes an organization with the verified sandbox domain;
# adds the sender domains of the document's examples as verified domains (so the examples' sends
# are accepted) and an ADMIN key allowed 1,000 requests a second (the default 10 would answer most
# of the run with 429); then runs every phase: the document's examples, coverage (each field's
# boundaries and invalid values), fuzzing, and stateful sequences following the document's links
# (create a domain, a key, a contact... then use their ids). Checks: no 5xx; status, content type,
# headers and body as documented; no request the document calls invalid accepted. The seed and the
# counts are fixed, so a run is reproducible. The report goes to stdout and, as JUnit XML, to
# .ci-artifacts/schemathesis/ beside the service's log. Exits non-zero on any failure; the service
# is stopped however the run ends.
#
#   bash tools/schemathesis.sh                                   # as CI runs it
#   bash tools/schemathesis.sh --include-path-regex '^/emails'   # extra arguments go to `st run`
#
# Switches (defaults): SCHEMATHESIS_SEED (38), SCHEMATHESIS_MAX_EXAMPLES (40 per operation in the
# fuzzing phase), SCHEMATHESIS_STATEFUL_SCENARIOS (200) of up to SCHEMATHESIS_STATEFUL_STEPS (30)
# calls, SCHEMATHESIS_TIME_LIMIT (240: seconds `st run` may take before it is stopped and the step
# fails). The step takes about a minute and a half on 2 idle cores, the service's start included.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
st=$root/.tools/venv/bin/st

say() { printf '[schemathesis] %s\n' "$*"; }

if [ ! -x "$st" ]; then
  say "skipped: schemathesis is not installed in .tools/venv (npm run tools installs it; it needs Python 3.11+ with venv)"
  exit 0
fi

SEED=${SCHEMATHESIS_SEED:-38}
MAX_EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-40}
STATEFUL_SCENARIOS=${SCHEMATHESIS_STATEFUL_SCENARIOS:-200}
STATEFUL_STEPS=${SCHEMATHESIS_STATEFUL_STEPS:-30}
TIME_LIMIT=${SCHEMATHESIS_TIME_LIMIT:-240}
artifacts=$root/.ci-artifacts/schemathesis
mkdir -p "$artifacts"
log=$artifacts/service.log
data=$(mktemp -d "${TMPDIR:-/tmp}/svc-schemathesis.XXXXXX")
service_pid=

stop_service() {
  local status=$?
  if [ -n "$service_pid" ]; then
    # The service has its own process group (npm, tsx, node, the embedded PostgreSQL): SIGTERM to
    # the group is Ctrl-C's shutdown; whatever is still there after 20 s is killed.
    kill -TERM -- "-$service_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 -- "-$service_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$service_pid" 2>/dev/null || true
  fi
  rm -rf "$data"
  exit "$status"
}
trap stop_service EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# NODE_ENV unset: the first start makes the sandbox domain and keys. PORT=0 picks a free port, which
# the banner prints. The SMTP relay and the bounce listener are not under test here.
say "starting the service (DATA_DIR $data, log $log)"
set -m # its own process group, so that stopping it reaches every process it started
env -u NODE_ENV DATA_DIR="$data" PORT=0 HOST=127.0.0.1 DEV_SMTP_PORT=0 SMTP_RELAY_PORT=off INBOUND_SMTP_PORT=off \
  DOMAIN_WARMUP=off LOG_LEVEL=warn npm start >"$log" 2>&1 &
service_pid=$!
set +m

# A banner line: two spaces, the label, two or more spaces, the value ("API keys" is not "API").
banner() { sed -n "s/^  $1   *\([^ ].*\)$/\1/p" "$log" | head -n 1; }
api=
for _ in $(seq 1 240); do
  api=$(banner 'API')
  [ -n "$api" ] && break
  if ! kill -0 "$service_pid" 2>/dev/null; then
    say "the service exited before it was ready; its log:"
    cat "$log"
    exit 1
  fi
  sleep 0.5
done
if [ -z "$api" ]; then
  say "the service printed no banner within 120 s; its log:"
  cat "$log"
  exit 1
fi
org=$(banner 'Organization')
curl -fsS --retry 20 --retry-connrefused --retry-delay 1 -o /dev/null "${api%/api/v1}/health"
document=$(curl -sS -o "$data/openapi.json" -w '%{http_code}' "$api/openapi.json")
if [ "$document" != 200 ]; then
  say "GET $api/openapi.json answered $document, not the document"
  exit 1
fi

# `svc` reuses the embedded PostgreSQL the service runs in DATA_DIR.
svc() { DATA_DIR="$data" LOG_LEVEL=warn DOMAIN_WARMUP=off npx tsx cli/svc.ts "$@"; }
domains=$("$root/.tools/venv/bin/python" - "$data/openapi.json" <<'PY'
import json, re, sys

found = set()

def walk(value, key=None):
    if isinstance(value, dict):
        for k, v in value.items():
            walk(v, k)
    elif isinstance(value, list):
        for v in value:
            walk(v, key)
    elif key == "from" and isinstance(value, str):
        m = re.search(r"@([A-Za-z0-9.-]+)>?\s*$", value)
        if m:
            found.add(m.group(1).lower())

with open(sys.argv[1]) as f:
    walk(json.load(f))
print("\n".join(sorted(found - {"sandbox.test"})))
PY
)
for domain in $domains; do
  svc domain create --org "$org" --name "$domain" --verified >/dev/null
done
token=$(svc key create --org "$org" --name schemathesis --permission admin --mode live --rate 1000 |
  sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
if [ -z "$token" ]; then
  say "could not make an ADMIN key with svc key create"
  exit 1
fi

# What the command line cannot say. Ids come from the document's links only: with ids picked from
# earlier answers, or links it infers on its own, schemathesis revokes the very key it runs with
# (listed by GET /keys) and deletes the examples' sender domains, and the rest of the run is 401s
# and refusals. The stateful phase has its own scenario count and length (so the example count is
# here too: `--max-examples` on the command line would override the stateful phase's).
cat >"$data/schemathesis.toml" <<TOML
[generation]
max-examples = $MAX_EXAMPLES

[phases.examples.extra-data-sources]
responses = false

[phases.coverage.extra-data-sources]
responses = false

[phases.fuzzing.extra-data-sources]
responses = false

[phases.stateful]
max-steps = $STATEFUL_STEPS

[phases.stateful.inference]
algorithms = []

[phases.stateful.generation]
max-examples = $STATEFUL_SCENARIOS
TOML
say "service at $api, organization $org, verified sender domains: sandbox.test $(echo $domains)"
say "st run: seed $SEED, $MAX_EXAMPLES examples per operation, $STATEFUL_SCENARIOS stateful scenarios of up to $STATEFUL_STEPS calls"

# A time limit, not --max-time (which repeats fuzzing until the time is spent: not reproducible).
# --foreground: Ctrl-C reaches st, which stops and reports. One worker: with two, Python 3.11's
# AST constructor (Hypothesis parses its own sources in each thread) failed a coverage case with
# "AST constructor recursion depth mismatch" (CPython gh-106905); it costs no time here either.
status=0
timeout --foreground --signal=INT --kill-after=20 "$TIME_LIMIT" \
  "$st" --config-file "$data/schemathesis.toml" run "$api/openapi.json" \
  --header "Authorization: Bearer $token" \
  --phases examples,coverage,fuzzing,stateful \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection \
  --seed "$SEED" \
  --generation-database none \
  --workers 1 \
  --request-timeout 20 \
  --max-response-time 10 \
  --no-color \
  --report junit \
  --report-junit-path "$artifacts/junit.xml" \
  "$@" || status=$?
if [ "$status" -eq 124 ]; then
  say "stopped after $TIME_LIMIT s (SCHEMATHESIS_TIME_LIMIT): the run must fit in its time; lower the counts or find what got slow"
fi
if grep -q '"level":[56]0' "$log"; then
  say "the service logged errors during the run (error_id of a 5xx is in its line; all in $log):"
  grep '"level":[56]0' "$log" | tail -n 20
fi
exit "$status"
