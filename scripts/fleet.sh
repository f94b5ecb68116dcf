#!/usr/bin/env bash
# A fleet on loopback: REPLICAS `modelless serve` processes of one config behind
# Debian's nginx, which balances every request (not every connection) to the replica
# with the fewest under way (least_conn): gRPC over HTTP/2 to the replicas, HTTP/1.1
# with keep-alive for REST. Everything binds to 127.0.0.1, runs at most LIMIT_S
# seconds, and is stopped when the script ends (SIGTERM, then SIGKILL after the
# replicas' drain time).
#
#   bash scripts/fleet.sh [-- COMMAND ...]
#
# Without a command it serves until Ctrl-C or LIMIT_S; with one it runs the command
# once the fleet is ready, then stops the fleet. The command sees
#   FLEET_GRPC=http://127.0.0.1:GRPC_PORT  FLEET_HTTP=http://127.0.0.1:HTTP_PORT
#   FLEET_DIR (logs, nginx.conf, access.log)  FLEET_PIDS (the replicas', in order)
#   FLEET_GRPC_UPSTREAMS (the replicas' gRPC addresses, in order)
#
#   REPLICAS=3 CONFIG=experiments/fleet.toml GRPC_PORT=18000 HTTP_PORT=18080
#   BASE_PORT=18100 (replica i: gRPC BASE_PORT+2i, HTTP BASE_PORT+2i+1)
#   LIMIT_S=900 FLEET_DIR=<temporary> MODELLESS=<release build>
#
# A CONFIG with `%i` in its name gives replica i its own (e.g. fleet-%i.toml). How
# the replicas share the cores is the config's business: experiments/fleet.toml gives
# each one ONNX Runtime thread that does not spin.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPLICAS="${REPLICAS:-3}"
CONFIG="$(realpath -m "${CONFIG:-$ROOT/experiments/fleet.toml}")"
GRPC_PORT="${GRPC_PORT:-18000}"
HTTP_PORT="${HTTP_PORT:-18080}"
BASE_PORT="${BASE_PORT:-18100}"
LIMIT_S="${LIMIT_S:-900}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
log() { echo "fleet: $*" >&2; }

[[ "${1:-}" == "--" ]] && shift
command -v nginx >/dev/null || { log "nginx is not installed (apt-get install nginx)"; exit 2; }
if [[ -z "${MODELLESS:-}" ]]; then
    # Started on its own (from a fresh clone, say): the models and the CLI first.
    MODELLESS="$CARGO_TARGET_DIR/fleet/modelless"
    bash "$ROOT/scripts/release_cli.sh" "$MODELLESS"
fi
if [[ -z "${ORT_DYLIB_PATH:-}" && -e "$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so" ]]; then
    export ORT_DYLIB_PATH="$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so"
fi
FLEET_DIR="${FLEET_DIR:-$(mktemp -d -t modelless-fleet.XXXXXX)}"
mkdir -p "$FLEET_DIR"
FLEET_DIR="$(realpath "$FLEET_DIR")"
chmod 755 "$FLEET_DIR"

pids=()
nginx_pid=""
command_pid=""
started=$SECONDS
stop_all() {
    local status=$?
    trap - EXIT INT TERM
    if [[ -n "$command_pid" ]]; then
        kill -TERM "$command_pid" 2>/dev/null || true
    fi
    if [[ -n "$nginx_pid" ]]; then
        kill -QUIT "$nginx_pid" 2>/dev/null || true
    fi
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    # The replicas drain for up to their drain_timeout_s (30 s in the fleet config).
    for _ in $(seq 1 350); do
        local alive=0
        for pid in "${pids[@]}" $nginx_pid; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${pids[@]}" $nginx_pid; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    log "stopped after $((SECONDS - started)) s; logs in $FLEET_DIR"
    exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Profiles are measured once, before the replicas start: three replicas profiling
# at once would measure each other.
log "profiling the variants (reused while stored profiles match)"
"$MODELLESS" profile "${CONFIG//%i/0}" --out "$FLEET_DIR/profiles" >"$FLEET_DIR/profile.log" 2>&1 ||
    { log "profiling failed:"; tail -5 "$FLEET_DIR/profile.log" >&2; exit 1; }

upstreams_grpc=""
upstreams_http=""
grpc_addresses=()
for ((i = 0; i < REPLICAS; i++)); do
    grpc="127.0.0.1:$((BASE_PORT + 2 * i))"
    http="127.0.0.1:$((BASE_PORT + 2 * i + 1))"
    "$MODELLESS" serve --config "${CONFIG//%i/$i}" --grpc "$grpc" --http "$http" >"$FLEET_DIR/replica-$i.log" 2>&1 &
    pids+=($!)
    grpc_addresses+=("$grpc")
    # One failure marks a replica down for 2 s: a replica that stopped is skipped at
    # once, and one that came back is tried again soon.
    upstreams_grpc+="        server $grpc max_fails=1 fail_timeout=2s;"$'\n'
    upstreams_http+="        server $http max_fails=1 fail_timeout=2s;"$'\n'
done

cat >"$FLEET_DIR/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $FLEET_DIR/nginx.pid;
error_log $FLEET_DIR/error.log warn;
$( ((EUID == 0)) && echo "user root;")
events { worker_connections 4096; }
http {
    client_body_temp_path $FLEET_DIR/body;
    proxy_temp_path $FLEET_DIR/proxy;
    fastcgi_temp_path $FLEET_DIR/fastcgi;
    uwsgi_temp_path $FLEET_DIR/uwsgi;
    scgi_temp_path $FLEET_DIR/scgi;
    client_max_body_size 64m;
    # A client's connection lasts: nginx's default closes it after 1000 requests, and
    # gRPC clients fail the requests they had queued on it.
    keepalive_requests 100000000;
    keepalive_timeout 3600s;
    # Per request: when it ended, which replica(s) it went to and what they answered.
    log_format fleet '\$msec \$upstream_addr \$upstream_status \$status \$request_time '
                     '\$upstream_trailer_grpc_status \$request_uri';
    access_log $FLEET_DIR/access.log fleet;

    upstream modelless_grpc {
        least_conn;
$upstreams_grpc        keepalive 64;
        keepalive_requests 100000000;
    }
    upstream modelless_http {
        least_conn;
$upstreams_http        keepalive 64;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:$GRPC_PORT http2;
        http2_max_concurrent_streams 1024;
        location / {
            grpc_pass grpc://modelless_grpc;
            grpc_read_timeout 120s;
            # Inference has no side effects: a request whose replica went away before
            # answering is sent to another one.
            grpc_next_upstream error timeout http_502 http_503 non_idempotent;
            grpc_next_upstream_tries 3;
            # A request that no replica answered (its replica died holding it) gets a
            # gRPC status its client reads, not an HTML error page.
            error_page 502 503 504 = @unavailable;
        }
        location @unavailable {
            internal;
            default_type application/grpc;
            add_header grpc-status 14 always;
            add_header grpc-message "no replica answered: the one that had the request went away" always;
            return 204;
        }
    }
    server {
        listen 127.0.0.1:$HTTP_PORT;
        location / {
            proxy_pass http://modelless_http;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 3;
        }
    }
}
NGINX

# Ready when every replica says so (every preloaded variant warm).
for ((i = 0; i < REPLICAS; i++)); do
    http="127.0.0.1:$((BASE_PORT + 2 * i + 1))"
    until curl -sf "http://$http/v2/health/ready" >/dev/null; do
        kill -0 "${pids[$i]}" 2>/dev/null || { log "replica $i exited:"; tail -5 "$FLEET_DIR/replica-$i.log" >&2; exit 1; }
        ((SECONDS - started < LIMIT_S)) || { log "replica $i not ready within $LIMIT_S s"; exit 1; }
        sleep 0.2
    done
done
nginx -p "$FLEET_DIR" -c "$FLEET_DIR/nginx.conf" &
nginx_pid=$!
until curl -sf "http://127.0.0.1:$HTTP_PORT/v2/health/ready" >/dev/null; do
    kill -0 "$nginx_pid" 2>/dev/null || { log "nginx exited:"; cat "$FLEET_DIR/error.log" >&2; exit 1; }
    sleep 0.1
done
log "$REPLICAS replicas ready behind nginx: gRPC 127.0.0.1:$GRPC_PORT, HTTP 127.0.0.1:$HTTP_PORT ($((SECONDS - started)) s)"

export FLEET_GRPC="http://127.0.0.1:$GRPC_PORT" FLEET_HTTP="http://127.0.0.1:$HTTP_PORT" FLEET_DIR
export FLEET_PIDS="${pids[*]}" FLEET_GRPC_UPSTREAMS="${grpc_addresses[*]}"
printf '%s\n' "FLEET_GRPC=$FLEET_GRPC" "FLEET_HTTP=$FLEET_HTTP" "FLEET_PIDS=$FLEET_PIDS" \
    "FLEET_GRPC_UPSTREAMS=$FLEET_GRPC_UPSTREAMS" "NGINX_PID=$nginx_pid" >"$FLEET_DIR/fleet.env"
left=$((LIMIT_S - (SECONDS - started)))
# In the background and waited for, so that a signal to this script stops the fleet
# at once rather than when the command ends.
if (($# > 0)); then
    timeout --signal=TERM --kill-after=10 "$left" "$@" &
else
    sleep "$left" &
fi
command_pid=$!
wait "$command_pid"
