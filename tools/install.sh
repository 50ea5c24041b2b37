#!/usr/bin/env bash
# Installs Temporal's own tools into .tools/ from the package registries (never a release site):
#   .tools/bin/temporal               the Temporal CLI (`temporal server start-dev`: dev server + Web UI),
#                                     built from the Go module proxy with `go install`;
#   .tools/bin/temporal-server        the Temporal server (frontend, history, matching and worker
#                                     services, one per process in `svc temporal cluster`), with
#   .tools/bin/temporal-sql-tool      its schema tool and
#   .tools/bin/temporal-ui-server     the Temporal UI's server, each built the same way;
#   .tools/bin/temporal-test-server   a wrapper starting the Java time-skipping test server on 127.0.0.1
#                                     (tools/test-server/LoopbackTestServer.java), whose jars Maven fetches
#                                     from Maven Central (tools/test-server/pom.xml).
#   .tools/venv/bin/st                schemathesis, the property-based tester tools/schemathesis.sh runs
#                                     against the OpenAPI document, from PyPI into a Python virtualenv.
#   spamassassin                      Debian's package (apt-get), the filter the deliverability suite
#                                     scores the service's mail with (test/deliverability/).
# Idempotent: a tool already there at the pinned version is skipped. A machine without Go, or
# without Java and Maven, or without Python 3.11+, skips that tool with the reason; `npm test`
# (or tools/schemathesis.sh) then skips what needs it and says why. Go's module and build caches
# and Maven's repository are the tools' defaults (~/go/pkg/mod, ~/.cache/go-build, ~/.m2), which
# the machine keeps between runs, and the built CLI and schemathesis's wheels are kept by version
# in ~/.cache/svc-mail-tools, so another clone installs in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/.tools/bin
mkdir -p "$bin"

# v1.5.1: the newest tag `go install` accepts (from v1.6.0 the CLI's go.mod has a replace line).
TEMPORAL_CLI_VERSION=1.5.1
# The server the CLI embeds (its go.mod's go.temporal.io/server), its schema tool from the same
# module, and the UI server the CLI embeds: a cluster of the same code the dev server runs.
TEMPORAL_SERVER_VERSION=1.29.1
TEMPORAL_UI_VERSION=2.42.1
# The Java SDK's release whose temporal-test-server the pom names.
TEST_SERVER_VERSION=$(sed -n 's:.*<version>\([0-9.]*\)</version>.*:\1:p' tools/test-server/pom.xml | tail -n 1)
# schemathesis for tools/schemathesis.sh (CI's API fuzzing step); its seed is fixed there, its
# version here, so a run is reproducible.
SCHEMATHESIS_VERSION=4.32.5

say() { printf '[tools] %s\n' "$*"; }

# The built CLI is kept here too, by version, so a fresh clone on the same machine (CI's) links it
# again in a second instead of relinking a 250 MB binary (a minute and a half on 2 cores).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/svc-mail-tools

is_cli() { [ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -Eq "^\s+mod\s+github.com/temporalio/cli\s+v$TEMPORAL_CLI_VERSION\s"; }

install_cli() {
  if ! command -v go >/dev/null 2>&1; then
    say "temporal: skipped, Go is not installed (the live Temporal suites will be skipped; install Go 1.23+ and run npm run tools)"
    return
  fi
  # `go install` stamps no version into `temporal --version`; the module version is in the binary.
  if is_cli "$bin/temporal"; then
    say "temporal $TEMPORAL_CLI_VERSION: already installed ($bin/temporal)"
    return
  fi
  local cached=$cache/temporal-$TEMPORAL_CLI_VERSION
  if ! is_cli "$cached/temporal"; then
    say "temporal $TEMPORAL_CLI_VERSION: building with go install (a few minutes the first time; cached after)"
    local start=$SECONDS
    mkdir -p "$cached"
    CGO_ENABLED=0 GOBIN="$cached" go install "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_CLI_VERSION"
    say "temporal $TEMPORAL_CLI_VERSION: built in $((SECONDS - start)) s"
  fi
  ln -f "$cached/temporal" "$bin/temporal" 2>/dev/null || cp "$cached/temporal" "$bin/temporal"
  say "temporal $TEMPORAL_CLI_VERSION: installed ($bin/temporal)"
}

# The main module of a `go install`ed binary is `mod`, a library it was built from is `dep`.
is_built() { [ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -Eq "^\s+(mod|dep)\s+$2\s+v$3\s"; }

# A Go main built once per version into the cache and linked into .tools/bin under its own name.
install_go_tool() {
  local name=$1 version=$2 package=$3 module=$4
  if ! command -v go >/dev/null 2>&1; then
    say "$name: skipped, Go is not installed (the cluster suites will be skipped; install Go 1.23+ and run npm run tools)"
    return
  fi
  if is_built "$bin/$name" "$module" "$version"; then
    say "$name $version: already installed ($bin/$name)"
    return
  fi
  local cached=$cache/$name-$version
  if ! is_built "$cached/$name" "$module" "$version"; then
    say "$name $version: building with go install (a few minutes the first time; cached after)"
    local start=$SECONDS tmp
    tmp=$(mktemp -d)
    CGO_ENABLED=0 GOBIN="$tmp" go install "$package@v$version"
    mkdir -p "$cached"
    mv "$tmp/$(basename "$package")" "$cached/$name"
    rmdir "$tmp"
    say "$name $version: built in $((SECONDS - start)) s"
  fi
  ln -f "$cached/$name" "$bin/$name" 2>/dev/null || cp "$cached/$name" "$bin/$name"
  say "$name $version: installed ($bin/$name)"
}

install_cluster() {
  install_go_tool temporal-server "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/server go.temporal.io/server
  install_go_tool temporal-sql-tool "$TEMPORAL_SERVER_VERSION" go.temporal.io/server/cmd/tools/sql go.temporal.io/server
  install_go_tool temporal-ui-server "$TEMPORAL_UI_VERSION" github.com/temporalio/ui-server/v2/cmd/server github.com/temporalio/ui-server/v2
}

install_test_server() {
  local dir=$root/.tools/test-server
  local wrapper=$bin/temporal-test-server
  if [ -f "$dir/lib/temporal-test-server-$TEST_SERVER_VERSION.jar" ] && [ -f "$dir/classes/LoopbackTestServer.class" ] && [ -x "$wrapper" ] &&
    [ tools/test-server/LoopbackTestServer.java -ot "$dir/classes/LoopbackTestServer.class" ]; then
    say "temporal-test-server $TEST_SERVER_VERSION: already installed ($wrapper)"
    return
  fi
  if ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    say "temporal-test-server: skipped, a JDK or Maven is not installed (the time-skipping suite will be skipped; install a JDK 17+ and Maven and run npm run tools)"
    return
  fi
  say "temporal-test-server $TEST_SERVER_VERSION: fetching the jars with Maven"
  rm -rf "$dir"
  mvn -B -q -f tools/test-server/pom.xml dependency:copy-dependencies -DoutputDirectory="$dir/lib" -DincludeScope=runtime
  # TestServer's own main listens on every interface; this launcher of the same server binds 127.0.0.1.
  javac -cp "$dir/lib/*" -d "$dir/classes" tools/test-server/LoopbackTestServer.java
  # `exec`, so the SDK's handle on the child is the JVM itself and stopping it stops the server.
  cat >"$wrapper" <<WRAP
#!/usr/bin/env bash
exec java -cp '$dir/lib/*:$dir/classes' LoopbackTestServer "\$@"
WRAP
  chmod +x "$wrapper"
  say "temporal-test-server $TEST_SERVER_VERSION: installed ($wrapper)"
}

install_schemathesis() {
  local venv=$root/.tools/venv
  if [ "$("$venv/bin/st" --version 2>/dev/null)" = "st, version $SCHEMATHESIS_VERSION" ]; then
    say "schemathesis $SCHEMATHESIS_VERSION: already installed ($venv/bin/st)"
    return
  fi
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    say "schemathesis: skipped, Python 3.11+ is not installed (tools/schemathesis.sh will be skipped; install Python 3.11+ and run npm run tools)"
    return
  fi
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    say "schemathesis: skipped, Python's venv module is not installed (tools/schemathesis.sh will be skipped; install python3-venv and run npm run tools)"
    return
  fi
  # The wheels are kept by version: the registry's answers carry no caching headers, so pip's own
  # HTTP cache keeps nothing, and a fresh clone would download them all again.
  local wheels=$cache/schemathesis-$SCHEMATHESIS_VERSION
  local start=$SECONDS
  rm -rf "$venv"
  python3 -m venv "$venv"
  local pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$wheels")
  if ! "${pip[@]}" "schemathesis==$SCHEMATHESIS_VERSION" 2>/dev/null; then
    say "schemathesis $SCHEMATHESIS_VERSION: downloading it and its dependencies from PyPI into $wheels"
    mkdir -p "$wheels"
    "$venv/bin/pip" download --quiet --disable-pip-version-check --dest "$wheels" "schemathesis==$SCHEMATHESIS_VERSION"
    "${pip[@]}" "schemathesis==$SCHEMATHESIS_VERSION"
  fi
  say "schemathesis $SCHEMATHESIS_VERSION: installed in $((SECONDS - start)) s ($venv/bin/st)"
}

install_spamassassin() {
  if command -v spamassassin >/dev/null 2>&1; then
    say "spamassassin: already installed ($(spamassassin --version | head -n 1))"
    return
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "spamassassin: skipped, this is not a Debian-like system (the deliverability suite will be skipped; install SpamAssassin and run npm test)"
    return
  fi
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      say "spamassassin: skipped, installing Debian's package needs root (the deliverability suite will be skipped; run apt-get install spamassassin as root)"
      return
    fi
    sudo=(sudo)
  fi
  say "spamassassin: installing Debian's package with apt-get"
  local start=$SECONDS
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends spamassassin >/dev/null
  say "spamassassin: installed in $((SECONDS - start)) s ($(spamassassin --version | head -n 1))"
}

install_cli
install_cluster
install_test_server
install_schemathesis
install_spamassassin
