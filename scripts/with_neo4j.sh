#!/usr/bin/env bash
# Run a command beside a real Neo4j, then stop it.
#
#   scripts/with_neo4j.sh [--home DIR] [--port PORT] [--heap SIZE] [--page-cache SIZE] [--] COMMAND [ARG...]
#
# Builds tools/neo4j-server with Maven when its jar is missing or older than its sources (the
# first build downloads Neo4j into Maven's cache, later ones are quick), starts it on a free
# loopback port (bound by the server itself) with a generated password, and runs COMMAND with
# NEO4J_URI, NEO4J_USER, NEO4J_PASSWORD and NEO4J_DATABASE set, so that every envsched-gnn
# command and the store tests use that server. The server is stopped (SIGTERM) when COMMAND ends, fails or is
# interrupted; the exit status is COMMAND's. The server's own lines go to stderr, its version
# first.
#
#   --home DIR         keep the server's databases, logs and password (DIR/password, mode 600,
#                      written on the first start) in DIR, so that a restart reopens them;
#                      default: a temporary folder deleted on exit
#   --port PORT        Bolt's loopback port (default 0: a free one); with --home, a restart on
#                      the port of a server that was stopped or killed (what the store fault
#                      tests do); a port another process holds ends the script with status 3
#   --heap SIZE        the server's maximum Java heap (default $NEO4J_HEAP, else 1g)
#   --page-cache SIZE  Neo4j's page cache (default $NEO4J_PAGE_CACHE, else 512m)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
project="$root/tools/neo4j-server"
jar="$project/target/neo4j-server.jar"
home=""
port=0
heap="${NEO4J_HEAP:-1g}"
page_cache="${NEO4J_PAGE_CACHE:-512m}"

usage() {
    sed -n '4p' "$0" | sed 's/^# *//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --home) [ $# -ge 2 ] || usage; home="$2"; shift 2 ;;
        --port) [ $# -ge 2 ] || usage; port="$2"; shift 2 ;;
        --heap) [ $# -ge 2 ] || usage; heap="$2"; shift 2 ;;
        --page-cache) [ $# -ge 2 ] || usage; page_cache="$2"; shift 2 ;;
        --) shift; break ;;
        -*) echo "with_neo4j.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || usage

stale="$(find "$project/pom.xml" "$project/src" -newer "$jar" -print -quit 2>/dev/null || true)"
if [ ! -f "$jar" ] || [ -n "$stale" ]; then
    echo "with_neo4j.sh: building $project (Maven)" >&2
    mvn -q -B -f "$project/pom.xml" package -DskipTests >&2
fi

work="$(mktemp -d)"
server=""
stop_server() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "$home" ]; then
    mkdir -p "$home"
    if [ -f "$home/password" ]; then
        password="$(cat "$home/password")"
    else
        password="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
        (umask 077 && printf '%s\n' "$password" > "$home/password")
    fi
    home_args=(--home "$home")
else
    password="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
    home_args=()
fi

mkfifo "$work/uri"
NEO4J_PASSWORD="$password" NEO4J_USER=neo4j \
    java "-Xmx$heap" -jar "$jar" "${home_args[@]}" --port "$port" --page-cache "$page_cache" \
    > "$work/uri" &
server=$!
uri=""
# the server prints its URI once it answers; it ends the pipe when it exits
read -r uri < "$work/uri" || true
if [ -z "$uri" ]; then
    started=0
    wait "$server" || started=$?
    echo "with_neo4j.sh: the Neo4j server did not start (see the lines above)" >&2
    exit $((started == 0 ? 1 : started))
fi

export NEO4J_URI="$uri" NEO4J_USER=neo4j NEO4J_PASSWORD="$password" NEO4J_DATABASE=neo4j
set +e
"$@"
status=$?
set -e
exit "$status"
