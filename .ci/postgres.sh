# Sourced by .ci/run: start a throw-away PostgreSQL on loopback for the tests that can use
# one (they read FEDROC_TEST_POSTGRES_URL and skip without it). Best effort and quiet: it
# does nothing unless run as root with Debian's packages at hand, and never fails CI.
fedroc_pg_dir=""

fedroc_stop_postgres() {
    if [ -n "$fedroc_pg_dir" ] && [ -d "$fedroc_pg_dir/data" ]; then
        runuser -u postgres -- "$fedroc_pg_bin/pg_ctl" -D "$fedroc_pg_dir/data" -m immediate \
            stop >/dev/null 2>&1 || true
        rm -rf "$fedroc_pg_dir"
    fi
}

fedroc_start_postgres() {
    [ -z "${FEDROC_TEST_POSTGRES_URL:-}" ] || return 0
    [ "$(id -u)" = 0 ] || return 0
    command -v runuser >/dev/null 2>&1 || return 0
    fedroc_pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$fedroc_pg_bin" ] && command -v apt-get >/dev/null 2>&1; then
        local t0=$SECONDS
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends postgresql; } >/dev/null 2>&1 || return 0
        echo "ci: installed postgresql in $((SECONDS - t0)) s" >&2
        fedroc_pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    fi
    [ -n "$fedroc_pg_bin" ] && id postgres >/dev/null 2>&1 || return 0
    local t1=$SECONDS port
    fedroc_pg_dir=$(mktemp -d /tmp/fedroc-pg.XXXXXX) || return 0
    chown postgres "$fedroc_pg_dir" || return 0
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 0
    runuser -u postgres -- "$fedroc_pg_bin/initdb" -D "$fedroc_pg_dir/data" -A trust -U postgres \
        >/dev/null 2>&1 || { fedroc_pg_dir_cleanup; return 0; }
    if ! runuser -u postgres -- "$fedroc_pg_bin/pg_ctl" -D "$fedroc_pg_dir/data" -l "$fedroc_pg_dir/log" \
        -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port -k $fedroc_pg_dir" start >/dev/null 2>&1; then
        fedroc_stop_postgres
        return 0
    fi
    trap fedroc_stop_postgres EXIT
    export FEDROC_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "ci: PostgreSQL for the tests on 127.0.0.1:$port (started in $((SECONDS - t1)) s)" >&2
}

fedroc_pg_dir_cleanup() { rm -rf "$fedroc_pg_dir"; fedroc_pg_dir=""; }
