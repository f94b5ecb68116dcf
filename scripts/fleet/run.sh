#!/usr/bin/env bash
# A fleet on loopback: REPLICAS `modelless serve` processes of one config behind
# Debian's nginx, which balances every request (not every connection) to the replica
# with the fewest under way (least_conn): gRPC over HTTP/2 to the replicas, HTTP/1.1
# with keep-alive for REST. Everything binds to 127.0.0.1, runs at most LIMIT_S
# seconds, and is stopped when the script ends (SIGTERM, then SIGKILL after the
# replicas' drain time).
#
#   bash scripts/fleet/run.sh [-- COMMAND ...]
#
# Without a command it serves until Ctrl-C or LIMIT_S; with one it runs the command
# once the fleet is ready, then stops the fleet. The command sees
#   FLEET_GRPC=http://127.0.0.1:GRPC_PORT  FLEET_HTTP=http://127.0.0.1:HTTP_PORT
#   FLEET_DIR (logs, nginx.conf, access.log)  FLEET_PIDS (the replicas', in order)
#   FLEET_GRPC_UPSTREAMS (the replicas' gRPC addresses, in order)
#
#   REPLICAS=3 CONFIG=experiments/fleet.toml GRPC_PORT=18000 HTTP_PORT=18080
#   BASE_PORT=18100 (replica i: gRPC BASE_PORT+2i, HTTP BASE_PORT+2i+1)
#   LIMIT_S=900 FLEET_DIR=<temporary> MODELLESS=<release build> SCALABLE=0
#
# With SCALABLE=1, replicas are added and removed while it runs, with
# scripts/fleet/scale.sh (add, remove [INDEX]), which hands the change to this script
# through the FIFO $FLEET_DIR/control and waits for its answer in $FLEET_DIR/scale.log.
# A replica added gets the next index, and joins nginx's upstreams once it is ready;
# one removed leaves them first (nginx reloads, and its old workers finish what they
# hold), then drains on SIGTERM and exits. A reload makes nginx's old workers send
# their clients' HTTP/2 connections a GOAWAY, and a gRPC client that sent a request
# as it came fails it unless it retries: so the clients' connections are held by a
# second nginx in front, which never reloads, and which sends a request the reloading
# one dropped unread to it again. $FLEET_DIR/fleet.env is rewritten after each change
# to name the replicas serving.
#
# A CONFIG with `%i` in its name gives replica i its own (e.g. fleet-%i.toml). How
# the replicas share the cores is the config's business: experiments/fleet.toml gives
# each one ONNX Runtime thread that does not spin.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
REPLICAS="${REPLICAS:-3}"
CONFIG="$(realpath -m "${CONFIG:-$ROOT/experiments/fleet.toml}")"
GRPC_PORT="${GRPC_PORT:-18000}"
HTTP_PORT="${HTTP_PORT:-18080}"
BASE_PORT="${BASE_PORT:-18100}"
LIMIT_S="${LIMIT_S:-900}"
SCALABLE="${SCALABLE:-0}"
# The longest a change waits: for nginx's old workers to finish what they hold, for
# a removed replica to drain (its drain_timeout_s, 30 s in the fleet config).
CHANGE_LIMIT_S=60
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
log() { echo "fleet: $*" >&2; }

[[ "${1:-}" == "--" ]] && shift
command -v nginx >/dev/null || { log "nginx is not installed (apt-get install nginx)"; exit 2; }
if [[ -z "${MODELLESS:-}" ]]; then
    # Started on its own (from a fresh clone, say): the models and the CLI first.
    MODELLESS="$CARGO_TARGET_DIR/fleet/modelless"
    bash "$ROOT/scripts/build/release_cli.sh" "$MODELLESS"
fi
if [[ -z "${ORT_DYLIB_PATH:-}" && -e "$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so" ]]; then
    export ORT_DYLIB_PATH="$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so"
fi
FLEET_DIR="${FLEET_DIR:-$(mktemp -d -t modelless-fleet.XXXXXX)}"
mkdir -p "$FLEET_DIR"
FLEET_DIR="$(realpath "$FLEET_DIR")"
chmod 755 "$FLEET_DIR"
CONTROL="$FLEET_DIR/control"
if ((SCALABLE)); then
    # The nginx in front of the replicas listens where only the front reaches it.
    BACK_GRPC="unix:$FLEET_DIR/grpc.sock" BACK_HTTP="unix:$FLEET_DIR/http.sock"
    ((${#BACK_GRPC} < 100)) || { log "FLEET_DIR is too long a path for a socket in it: $FLEET_DIR"; exit 2; }
    rm -f "$FLEET_DIR/grpc.sock" "$FLEET_DIR/http.sock"
else
    BACK_GRPC="127.0.0.1:$GRPC_PORT" BACK_HTTP="127.0.0.1:$HTTP_PORT"
fi

# Replica i's process, addresses; `live` lists the replicas in nginx's upstreams, in
# the order they joined. A replica's index is never reused: it names its ports and log.
declare -A pid_of=() grpc_of=() http_of=()
live=()
next_index=0
nginx_pid=""
front_pid=""
command_pid=""
started=$SECONDS
stop_all() {
    local status=$?
    trap - EXIT INT TERM
    exec 3>&-
    rm -f "$CONTROL"
    if [[ -n "$command_pid" ]]; then
        kill -TERM "$command_pid" 2>/dev/null || true
    fi
    for pid in $front_pid $nginx_pid; do kill -QUIT "$pid" 2>/dev/null || true; done
    for pid in "${pid_of[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    # The replicas drain for up to their drain_timeout_s (30 s in the fleet config).
    for _ in $(seq 1 350); do
        local alive=0
        for pid in "${pid_of[@]}" $nginx_pid $front_pid; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for pid in "${pid_of[@]}" $nginx_pid $front_pid; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    log "stopped after $((SECONDS - started)) s; logs in $FLEET_DIR"
    exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Starts replica `next_index`, the next index.
start_replica() {
    local i=$next_index
    next_index=$((next_index + 1))
    grpc_of[$i]="127.0.0.1:$((BASE_PORT + 2 * i))"
    http_of[$i]="127.0.0.1:$((BASE_PORT + 2 * i + 1))"
    "$MODELLESS" serve --config "${CONFIG//%i/$i}" --grpc "${grpc_of[$i]}" --http "${http_of[$i]}" \
        >"$FLEET_DIR/replica-$i.log" 2>&1 &
    pid_of[$i]=$!
}

# Waits until replica $1 says it is ready (every preloaded variant warm), for at most
# $2 seconds; fails if it exits first.
wait_ready() {
    local i=$1 limit=$2 from=$SECONDS
    until curl -sf "http://${http_of[$i]}/v2/health/ready" >/dev/null; do
        kill -0 "${pid_of[$i]}" 2>/dev/null || { log "replica $i exited:"; tail -5 "$FLEET_DIR/replica-$i.log" >&2; return 1; }
        ((SECONDS - from < limit)) || { log "replica $i not ready within $limit s"; return 1; }
        sleep 0.2
    done
}

# The config of one of the fleet's nginx: $1 its files' prefix in FLEET_DIR ("" for the
# one in front of the replicas, "front-" for the front), $2 and $3 where it listens for
# gRPC and HTTP, $4 and $5 its upstream blocks' bodies, $6 and $7 the tries its gRPC and
# HTTP requests get.
nginx_conf() {
    local name=$1 listen_grpc=$2 listen_http=$3 upstream_grpc=$4 upstream_http=$5 tries_grpc=$6 tries_http=$7
    cat <<NGINX
worker_processes 1;
daemon off;
pid $FLEET_DIR/${name}nginx.pid;
error_log $FLEET_DIR/${name}error.log warn;
$( ((EUID == 0)) && echo "user root;")
events { worker_connections 4096; }
http {
    client_body_temp_path $FLEET_DIR/${name}body;
    proxy_temp_path $FLEET_DIR/${name}proxy;
    fastcgi_temp_path $FLEET_DIR/${name}fastcgi;
    uwsgi_temp_path $FLEET_DIR/${name}uwsgi;
    scgi_temp_path $FLEET_DIR/${name}scgi;
    client_max_body_size 64m;
    # A client's connection lasts: nginx's default closes it after 1000 requests, and
    # gRPC clients fail the requests they had queued on it.
    keepalive_requests 100000000;
    keepalive_timeout 3600s;
    # Per request: when it ended, which replica(s) it went to and what they answered.
    log_format fleet '\$msec \$upstream_addr \$upstream_status \$status \$request_time '
                     '\$upstream_trailer_grpc_status \$request_uri';
    access_log $FLEET_DIR/${name}access.log fleet;

    upstream modelless_grpc {
$upstream_grpc    }
    upstream modelless_http {
$upstream_http    }
    server {
        listen $listen_grpc http2;
        http2_max_concurrent_streams 1024;
        location / {
            grpc_pass grpc://modelless_grpc;
            grpc_read_timeout 120s;
            # Inference has no side effects: a request whose replica went away before
            # answering is sent to another one.
            grpc_next_upstream error timeout http_502 http_503 non_idempotent;
            grpc_next_upstream_tries $tries_grpc;
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
        listen $listen_http;
        location / {
            proxy_pass http://modelless_http;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries $tries_http;
        }
    }
}
NGINX
}

# The config of the nginx in front of the replicas, with those in `live` as its
# upstreams, least connections first; checked by nginx before it replaces the one in use.
write_nginx_conf() {
    local i upstream_grpc="        least_conn;"$'\n' upstream_http="        least_conn;"$'\n'
    for i in "${live[@]}"; do
        # One failure marks a replica down for 2 s: a replica that stopped is skipped at
        # once, and one that came back is tried again soon.
        upstream_grpc+="        server ${grpc_of[$i]} max_fails=1 fail_timeout=2s;"$'\n'
        upstream_http+="        server ${http_of[$i]} max_fails=1 fail_timeout=2s;"$'\n'
    done
    upstream_grpc+="        keepalive 64;"$'\n'"        keepalive_requests 100000000;"$'\n'
    upstream_http+="        keepalive 64;"$'\n'"        keepalive_requests 100000000;"$'\n'
    nginx_conf "" "$BACK_GRPC" "$BACK_HTTP" "$upstream_grpc" "$upstream_http" 3 3 >"$FLEET_DIR/nginx.conf.next"
    nginx -t -q -p "$FLEET_DIR" -c "$FLEET_DIR/nginx.conf.next" 2>>"$FLEET_DIR/error.log" ||
        { log "nginx refuses the new config: see $FLEET_DIR/error.log"; return 1; }
    mv "$FLEET_DIR/nginx.conf.next" "$FLEET_DIR/nginx.conf"
}

# With SCALABLE=1, the front's config: the clients' ports, and the nginx behind it
# (twice, never marked down, a new connection per request). When that one reloads,
# its old workers close the connections they hold no request on; the front sends a
# request that met one of those closing to a new connection, which a new worker takes.
write_front_conf() {
    local upstream_grpc="" upstream_http="" twice
    for twice in 1 2; do
        upstream_grpc+="        server $BACK_GRPC max_fails=0;"$'\n'
        upstream_http+="        server $BACK_HTTP max_fails=0;"$'\n'
    done
    nginx_conf front- "127.0.0.1:$GRPC_PORT" "127.0.0.1:$HTTP_PORT" "$upstream_grpc" "$upstream_http" 0 0 \
        >"$FLEET_DIR/front-nginx.conf"
}

# The pids of nginx's workers (its master's children).
nginx_workers() {
    local stat line fields
    for stat in /proc/[0-9]*/stat; do
        { read -r line <"$stat"; } 2>/dev/null || continue
        # After the command's name, in parentheses: state, parent, ...
        read -r -a fields <<<"${line##*) }"
        if [[ "${fields[1]:-}" == "$nginx_pid" ]]; then
            stat=${stat#/proc/}
            echo "${stat%/stat}"
        fi
    done
}

# Makes nginx serve nginx.conf as it now is. Its master starts workers on it and asks
# the old ones to stop: they take no new requests and finish those they hold (their
# HTTP/2 clients get a GOAWAY and come back on a new connection). Returns once the
# old workers are gone, so that no request is still under way on a replica the new
# config left out.
reload_nginx() {
    local old from=$SECONDS pid left
    read -r -a old <<<"$(nginx_workers | tr '\n' ' ')"
    kill -HUP "$nginx_pid"
    while :; do
        left=0
        for pid in "${old[@]}"; do [[ -e /proc/$pid ]] && left=1; done
        ((left)) || return 0
        ((SECONDS - from < CHANGE_LIMIT_S)) || { log "nginx's old workers still run after $CHANGE_LIMIT_S s"; return 1; }
        sleep 0.05
    done
}

# fleet.env: the addresses, and the replicas serving now (in `live`).
write_env() {
    local i pids=() upstreams=()
    for i in "${live[@]}"; do
        pids+=("${pid_of[$i]}")
        upstreams+=("${grpc_of[$i]}")
    done
    printf '%s\n' "FLEET_GRPC=http://127.0.0.1:$GRPC_PORT" "FLEET_HTTP=http://127.0.0.1:$HTTP_PORT" \
        "FLEET_PIDS=${pids[*]}" "FLEET_GRPC_UPSTREAMS=${upstreams[*]}" "FLEET_REPLICAS=${live[*]}" \
        "NGINX_PID=$nginx_pid" ${front_pid:+"FRONT_NGINX_PID=$front_pid"} >"$FLEET_DIR/fleet.env.next"
    mv "$FLEET_DIR/fleet.env.next" "$FLEET_DIR/fleet.env"
}

# The time now, as nginx's access log stamps it (seconds since the epoch, in ms).
now() { date +%s.%3N; }

# Adds a replica, and says how in `answer`. (The changes run in this shell, not in a
# subshell: the replicas they start are this script's children, stopped with it.)
add_replica() {
    local i=$next_index
    start_replica
    if ! wait_ready "$i" "$CHANGE_LIMIT_S"; then
        kill -KILL "${pid_of[$i]}" 2>/dev/null || true
        wait "${pid_of[$i]}" 2>/dev/null || true
        unset "pid_of[$i]"
        answer="error replica $i did not get ready: see $FLEET_DIR/replica-$i.log"
        return
    fi
    live+=("$i")
    if ! { write_nginx_conf && reload_nginx; }; then
        answer="error nginx did not take replica $i"
        return
    fi
    write_env
    answer="ok added $i ${grpc_of[$i]} ${http_of[$i]} ${pid_of[$i]} joined=$(now)"
}

# Removes replica $1 (default: the newest), and says how in `answer`.
remove_replica() {
    local i=${1:-${live[-1]}} j rest=() left gone pid from
    if [[ ! "$i" =~ ^[0-9]+$ || ! " ${live[*]} " =~ " $i " ]]; then
        answer="error no replica '$i' serving (serving: ${live[*]})"
        return
    fi
    if ((${#live[@]} == 1)); then
        answer="error replica $i is the last one"
        return
    fi
    for j in "${live[@]}"; do [[ "$j" == "$i" ]] || rest+=("$j"); done
    live=("${rest[@]}")
    if ! { write_nginx_conf && reload_nginx; }; then
        answer="error nginx did not let replica $i go"
        return
    fi
    left=$(now)
    # Nothing reaches it now, and nothing is under way on it: it drains on SIGTERM (a
    # request sent it meanwhile would still be answered) and exits.
    kill -TERM "${pid_of[$i]}" 2>/dev/null || true
    from=$SECONDS
    while kill -0 "${pid_of[$i]}" 2>/dev/null; do
        if ((SECONDS - from >= CHANGE_LIMIT_S)); then
            log "replica $i still runs $CHANGE_LIMIT_S s after SIGTERM: SIGKILL"
            kill -KILL "${pid_of[$i]}" 2>/dev/null || true
        fi
        sleep 0.05
    done
    wait "${pid_of[$i]}" 2>/dev/null || true
    gone=$(now)
    pid=${pid_of[$i]}
    unset "pid_of[$i]"
    write_env
    answer="ok removed $i ${grpc_of[$i]} ${http_of[$i]} $pid left=$left gone=$gone"
}

# Profiles are measured once, before the replicas start: three replicas profiling
# at once would measure each other.
log "profiling the variants (reused while stored profiles match)"
"$MODELLESS" profile "${CONFIG//%i/0}" --out "$FLEET_DIR/profiles" >"$FLEET_DIR/profile.log" 2>&1 ||
    { log "profiling failed:"; tail -5 "$FLEET_DIR/profile.log" >&2; exit 1; }

for ((n = 0; n < REPLICAS; n++)); do start_replica; done
# Ready when every replica says so (every preloaded variant warm).
for ((i = 0; i < REPLICAS; i++)); do
    wait_ready "$i" $((LIMIT_S - (SECONDS - started))) || exit 1
    live+=("$i")
done
write_nginx_conf || exit 1
nginx -p "$FLEET_DIR" -c "$FLEET_DIR/nginx.conf" &
nginx_pid=$!
if ((SCALABLE)); then
    write_front_conf
    nginx -p "$FLEET_DIR" -c "$FLEET_DIR/front-nginx.conf" &
    front_pid=$!
fi
until curl -sf "http://127.0.0.1:$HTTP_PORT/v2/health/ready" >/dev/null; do
    for pid in $nginx_pid $front_pid; do
        kill -0 "$pid" 2>/dev/null || { log "nginx exited:"; cat "$FLEET_DIR"/*error.log >&2; exit 1; }
    done
    sleep 0.1
done
log "$REPLICAS replicas ready behind nginx: gRPC 127.0.0.1:$GRPC_PORT, HTTP 127.0.0.1:$HTTP_PORT ($((SECONDS - started)) s)"

if ((SCALABLE)); then
    rm -f "$CONTROL"
    mkfifo -m 600 "$CONTROL"
    # Held open for reading and writing: opening it never blocks, and a writer that
    # closes it leaves no end of file behind.
    exec 3<>"$CONTROL"
    : >"$FLEET_DIR/scale.log"
fi
export FLEET_GRPC="http://127.0.0.1:$GRPC_PORT" FLEET_HTTP="http://127.0.0.1:$HTTP_PORT" FLEET_DIR
write_env
FLEET_PIDS="$(sed -n 's/^FLEET_PIDS=//p' "$FLEET_DIR/fleet.env")"
FLEET_GRPC_UPSTREAMS="$(sed -n 's/^FLEET_GRPC_UPSTREAMS=//p' "$FLEET_DIR/fleet.env")"
export FLEET_PIDS FLEET_GRPC_UPSTREAMS
left=$((LIMIT_S - (SECONDS - started)))
# In the background, so that this script answers scaling commands and signals while
# it runs (a signal stops the fleet at once rather than when the command ends).
if (($# > 0)); then
    timeout --signal=TERM --kill-after=10 "$left" "$@" &
else
    sleep "$left" &
fi
command_pid=$!
while ((SCALABLE)) && kill -0 "$command_pid" 2>/dev/null; do
    # A line from scripts/fleet/scale.sh: `TOKEN add` or `TOKEN remove [INDEX]`; the
    # answer goes to scale.log as `TOKEN ok ...` or `TOKEN error ...`.
    if read -r -t 0.2 -u 3 token verb index; then
        case "$verb" in
            add) add_replica ;;
            remove) remove_replica "$index" ;;
            *) answer="error unknown command '$verb' (add, remove [INDEX])" ;;
        esac
        echo "$token $answer" >>"$FLEET_DIR/scale.log"
        log "$verb${index:+ $index}: $answer"
    fi
done
wait "$command_pid"
