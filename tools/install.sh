#!/usr/bin/env bash
# Installs Temporal's own tools into .tools/ from the package registries (never a release site):
#   .tools/bin/temporal               the Temporal CLI (`temporal server start-dev`: dev server + Web UI),
#                                     built from the Go module proxy with `go install`;
#   .tools/bin/temporal-test-server   a wrapper starting the Java time-skipping test server, whose jars
#                                     Maven fetches from Maven Central (tools/test-server/pom.xml).
# Idempotent: a tool already there at the pinned version is skipped. A machine without Go, or
# without Java and Maven, skips that tool with the reason; `npm test` then skips the suites that
# need it and says why. Go's module and build caches and Maven's repository are the tools'
# defaults (~/go/pkg/mod, ~/.cache/go-build, ~/.m2), which the machine keeps between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/.tools/bin
mkdir -p "$bin"

# v1.5.1: the newest tag `go install` accepts (from v1.6.0 the CLI's go.mod has a replace line).
TEMPORAL_CLI_VERSION=1.5.1
# The Java SDK's release whose temporal-test-server the pom names.
TEST_SERVER_VERSION=$(sed -n 's:.*<version>\([0-9.]*\)</version>.*:\1:p' tools/test-server/pom.xml | tail -n 1)

say() { printf '[tools] %s\n' "$*"; }

install_cli() {
  # `go install` stamps no version into `temporal --version`; the module version is in the binary.
  if [ -x "$bin/temporal" ] && command -v go >/dev/null 2>&1 &&
    go version -m "$bin/temporal" 2>/dev/null | grep -Eq "^\s+mod\s+github.com/temporalio/cli\s+v$TEMPORAL_CLI_VERSION\s"; then
    say "temporal $TEMPORAL_CLI_VERSION: already installed ($bin/temporal)"
    return
  fi
  if ! command -v go >/dev/null 2>&1; then
    say "temporal: skipped, Go is not installed (the live Temporal suites will be skipped; install Go 1.23+ and run npm run tools)"
    return
  fi
  say "temporal $TEMPORAL_CLI_VERSION: building with go install (a few minutes the first time; cached after)"
  local start=$SECONDS
  CGO_ENABLED=0 GOBIN="$bin" go install "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_CLI_VERSION"
  say "temporal $TEMPORAL_CLI_VERSION: built in $((SECONDS - start)) s"
}

install_test_server() {
  local lib=$root/.tools/test-server/lib
  local wrapper=$bin/temporal-test-server
  if [ -f "$lib/temporal-test-server-$TEST_SERVER_VERSION.jar" ] && [ -x "$wrapper" ]; then
    say "temporal-test-server $TEST_SERVER_VERSION: already installed ($wrapper)"
    return
  fi
  if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    say "temporal-test-server: skipped, Java or Maven is not installed (the time-skipping suite will be skipped; install a JDK 17+ and Maven and run npm run tools)"
    return
  fi
  say "temporal-test-server $TEST_SERVER_VERSION: fetching the jars with Maven"
  rm -rf "$lib"
  mvn -B -q -f tools/test-server/pom.xml dependency:copy-dependencies -DoutputDirectory="$lib" -DincludeScope=runtime
  # `exec`, so the SDK's handle on the child is the JVM itself and stopping it stops the server.
  cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
exec java -cp '$lib/*' io.temporal.testserver.TestServer "\$@"
WRAP
  chmod +x "$wrapper"
  say "temporal-test-server $TEST_SERVER_VERSION: installed ($wrapper)"
}

install_cli
install_test_server
