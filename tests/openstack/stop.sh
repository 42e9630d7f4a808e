#!/usr/bin/env bash
# Stop everything tests/openstack/setup.sh started, by the PID files in $OS_STATE_DIR/run.
# Each service runs in its own session (setsid), so its whole process group is signalled:
# uwsgi master + worker, glance/neutron/cinder workers, rabbitmq's wrapper + beam, ...
# The state dir (databases, images, keys, configs, logs) is kept. Idempotent.
set -uo pipefail

S="${OS_STATE_DIR:-/var/tmp/cpi-openstack}"
RUN="$S/run"
log() { printf '%s [stop] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[[ -d "$RUN" ]] || { log "nothing to stop ($RUN does not exist)"; exit 0; }

# the lock setup.sh takes: never stop while a setup.sh is starting things
exec 9>>"${S%/}.lock"
flock -w 1500 9 || { log "timed out waiting for ${S%/}.lock"; exit 1; }

alive() {  # alive NAME -> prints the PID if run/NAME.pid names a live session leader
  local f="$RUN/$1.pid" pid
  [[ -s "$f" ]] || return 1
  pid="$(<"$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" == "$pid" ]] || return 1
  echo "$pid"
}

# stop_group TIMEOUT NAME...: TERM all named groups at once, wait, then KILL leftovers.
stop_group() {
  local timeout="$1"; shift
  local name pid pids=() names=() i
  for name in "$@"; do
    if pid="$(alive "$name")"; then
      log "stopping $name (pid $pid)"
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
      pids+=("$pid"); names+=("$name")
    fi
  done
  for ((i = 0; i < timeout * 10; i++)); do
    local left=0
    for pid in "${pids[@]}"; do
      # the group is gone when no process is left in it
      if pgrep -g "$pid" >/dev/null 2>&1; then left=1; fi
    done
    [[ $left -eq 0 ]] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if pgrep -g "$pid" >/dev/null 2>&1; then
      log "killing what is left of process group $pid"
      kill -KILL -- "-$pid" 2>/dev/null
    fi
  done
  for name in "$@"; do rm -f "$RUN/$name.pid"; done
}

stop_group 20 cinder-volume cinder-scheduler cinder-api neutron-server nova-compute \
  nova-scheduler nova-conductor nova-api glance-api placement keystone
stop_group 30 rabbitmq
stop_group 10 epmd
stop_group 60 mariadb
rm -f "$RUN/rabbitmq-beam.pid" "$RUN/mariadbd.own.pid"
log "stopped; state kept in $S"
