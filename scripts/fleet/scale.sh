#!/usr/bin/env bash
# Adds a replica to a running scripts/fleet/run.sh fleet, or removes one, and waits until
# the change is done:
#
#   bash scripts/fleet/scale.sh add             # ready, then in nginx's upstreams
#   bash scripts/fleet/scale.sh remove [INDEX]  # out of the upstreams, drained, exited
#
# FLEET_DIR names the fleet (run.sh gives it to the command it runs; it is also the
# folder its log names). INDEX is a replica's number (replica-INDEX.log; default: the
# newest). Prints run.sh's answer and exits 0 when it is `ok ...`:
#   ok added INDEX GRPC_ADDRESS HTTP_ADDRESS PID joined=TIME
#   ok removed INDEX GRPC_ADDRESS HTTP_ADDRESS PID left=TIME gone=TIME
# where `joined` is when nginx sends it requests, `left` when nginx had stopped
# sending it any and none was under way there, and `gone` when it had exited (seconds
# since the epoch, as nginx's access log stamps them). Waits at most SCALE_LIMIT_S
# seconds (150). One change at a time: run.sh takes them in turn.
set -euo pipefail

log() { echo "fleet_scale: $*" >&2; }
FLEET_DIR="${FLEET_DIR:?FLEET_DIR names the fleet (scripts/fleet/run.sh sets it for its command)}"
SCALE_LIMIT_S="${SCALE_LIMIT_S:-150}"
case "${1:-}" in
    add) (($# == 1)) || { log "usage: scale.sh add | remove [INDEX]"; exit 2; } ;;
    remove) (($# <= 2)) || { log "usage: scale.sh add | remove [INDEX]"; exit 2; } ;;
    *) log "usage: scale.sh add | remove [INDEX]"; exit 2 ;;
esac
control="$FLEET_DIR/control"
[[ -p "$control" ]] ||
    { log "no fleet takes changes in $FLEET_DIR: is scripts/fleet/run.sh running, with SCALABLE=1?"; exit 1; }

token="$$.$RANDOM"
# run.sh holds the FIFO open, so the write does not block while it runs; the
# timeout covers a fleet that ended between the check above and the write.
timeout 5 bash -c 'printf "%s\n" "$1" >"$2"' _ "$token $*" "$control" ||
    { log "could not reach the fleet through $control"; exit 1; }
started=$SECONDS
until answer=$(grep -m1 "^$token " "$FLEET_DIR/scale.log" 2>/dev/null); do
    ((SECONDS - started < SCALE_LIMIT_S)) || { log "no answer within $SCALE_LIMIT_S s"; exit 1; }
    [[ -p "$control" ]] || { log "the fleet stopped before it answered"; exit 1; }
    sleep 0.1
done
answer=${answer#"$token "}
echo "$answer"
[[ "$answer" == ok\ * ]]
