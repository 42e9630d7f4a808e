#!/usr/bin/env bash
# Real OpenStack (Keystone, Glance, Placement, Nova, Neutron, Cinder; Debian bookworm's
# packages) on 127.0.0.1, for the CPI's tests. Only the lowest layer is fake: nova's
# FakeDriver, a tiny ML2 mechanism driver that binds every port, and cinder's in-tree fake
# volume driver. Idempotent: installs what is missing, (re)starts what is not running,
# seeds what is not seeded, and writes $OS_STATE_DIR/cpi-openstack.json.
#
#   sudo tests/openstack/setup.sh            # everything
#   sudo tests/openstack/setup.sh --step X   # one step: install configs mariadb rabbitmq
#                                            #   keystone dbsync services seed_keystone
#                                            #   services_rpc services_late wait seed
# Stop with tests/openstack/stop.sh (state kept); remove $OS_STATE_DIR to start afresh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
S="${OS_STATE_DIR:-/var/tmp/cpi-openstack}"
export OS_STATE_DIR="$S"
PY=/usr/bin/python3          # Debian's python, where the services' packages live
HOSTNAME_OS=cpi-os           # the "host" every service registers as (stable across machines)
REGION=RegionOne
KS=http://127.0.0.1:5000/v3
# Throwaway credentials: everything listens on 127.0.0.1 / a unix socket only.
ADMIN_PASS=admin-secret
SVC_PASS=service-secret
DB_PASS=db-secret
RABBIT_URL="rabbit://guest:guest@127.0.0.1:5672/"
DBSOCK="$S/run/mysqld.sock"

log() { printf '%s [setup +%ss] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ $EUID -eq 0 ]] || die "run as root"

# One setup.sh / stop.sh at a time per state dir (test sessions may call setup.sh in parallel;
# a second caller waits, then finds everything up and returns in seconds). The services do not
# inherit the lock (start() closes fd 9).
LOCK="${S%/}.lock"
mkdir -p "$(dirname "$LOCK")"
exec 9>>"$LOCK"
flock -w 1500 9 || die "timed out waiting for $LOCK (another setup.sh or stop.sh)"

# ----------------------------------------------------------------------------- install
PKGS=(
  mariadb-server rabbitmq-server uwsgi-core uwsgi-plugin-python3 python3-pymysql
  keystone glance-api placement-api
  nova-api nova-conductor nova-scheduler python3-nova
  neutron-server python3-neutron
  cinder-api cinder-scheduler python3-cinder
  python3-openstacksdk openssh-client curl procps
)

packages_installed() {
  local out
  out="$(dpkg-query -W -f='${db:Status-Abbrev}\n' "${PKGS[@]}" 2>/dev/null)" || return 1
  [[ "$(grep -c '^ii' <<<"$out")" -eq "${#PKGS[@]}" ]]
}

step_install() {
  if packages_installed; then log "packages already installed"; return 0; fi
  log "installing ${#PKGS[*]} packages (and their dependencies)"
  export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true
  # No maintainer script may configure databases, RabbitMQ, Keystone or endpoints.
  local sel="" p q
  for p in keystone; do
    for q in configure_db create-admin-tenant register-endpoint; do sel+="$p $p/$q boolean false"$'\n'; done
  done
  for p in glance placement nova neutron cinder; do
    for q in configure_db configure_ksat configure_rabbit configure_api-endpoint \
             ksat-create-service-user configure_nova configure_neutron configure_placement; do
      sel+="$p-common $p/$q boolean false"$'\n'
    done
  done
  sel+="nova-api novaapi/configure_db boolean false"$'\n'
  sel+="man-db man-db/auto-update boolean false"$'\n'
  debconf-set-selections <<<"$sel"
  # Maintainer scripts start nothing.
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # An unreachable third-party source must not stop us: Debian's lists are what we need.
  apt-get update -q || log "apt-get update reported errors (continuing)"
  apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    -o Dpkg::Options::=--force-unsafe-io "${PKGS[@]}"
  if [[ $made_policy -eq 1 ]]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  packages_installed || die "packages missing after install"
}

# ----------------------------------------------------------------------------- helpers
declare -A DIRTY=()   # services whose config changed in this run (restarted if running)

# put FILE SERVICE... <content: write FILE only when its content differs; mark SERVICEs dirty.
put() {
  local f="$1"; shift
  local tmp; tmp="$(mktemp "$f.XXXXXX")"
  cat >"$tmp"
  if [[ -f "$f" ]] && cmp -s "$tmp" "$f"; then rm -f "$tmp"; return 0; fi
  mv -f "$tmp" "$f"; chmod 640 "$f"
  local svc; for svc in "$@"; do DIRTY[$svc]=1; done
}

db_url() { echo "mysql+pymysql://os:$DB_PASS@localhost/$1?unix_socket=$DBSOCK&charset=utf8"; }

# keystone_authtoken-style [section] for a service user
ks_auth() {
  cat <<EOT
auth_url = http://127.0.0.1:5000
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = $SVC_PASS
region_name = $REGION
EOT
}
authtoken() {
  cat <<EOT
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:5000
$(ks_auth "$1")
service_token_roles_required = true
EOT
}

pid_alive() {  # pid_alive NAME -> 0 if the PID in run/NAME.pid is a live process
  local f="$S/run/$1.pid" pid
  [[ -s "$f" ]] || return 1
  pid="$(<"$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  # a recycled PID after a reboot: the process must be a leader of its own session
  [[ "$(ps -o sid= -p "$pid" 2>/dev/null | tr -d ' ')" == "$pid" ]]
}

stop_one() {  # stop_one NAME: TERM the process group, then KILL after a grace period
  local f="$S/run/$1.pid" pid i
  pid_alive "$1" || { rm -f "$f"; return 0; }
  pid="$(<"$f")"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$f"
}

# start NAME CMD...: run CMD in its own session (pgid = pid), log to log/NAME.log, pid to
# run/NAME.pid. Already running and config unchanged: nothing. Env from SVC_ENV.
SVC_ENV=()
start() {
  local name="$1"; shift
  if pid_alive "$name"; then
    if [[ -z "${DIRTY[$name]:-}" ]]; then return 0; fi
    log "restarting $name (config changed)"
    stop_one "$name"
  fi
  log "starting $name"
  env "${SVC_ENV[@]}" setsid bash -c 'echo $$ >"$0"; exec "$@"' "$S/run/$name.pid" "$@" \
    </dev/null >>"$S/log/$name.log" 2>&1 9>&- &
  local i; for ((i = 0; i < 50; i++)); do [[ -s "$S/run/$name.pid" ]] && break; sleep 0.05; done
  STARTED+=("$name")
}
STARTED=()

wait_http() {  # wait_http NAME URL [timeout]: any HTTP answer below 500 counts
  local name="$1" url="$2" t="${3:-180}" code i
  for ((i = 0; i < t * 4; i++)); do
    code="$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$url" 2>/dev/null || true)"
    if [[ "$code" =~ ^[1-4][0-9][0-9]$ ]]; then return 0; fi
    if ! pid_alive "$name"; then tail -30 "$S/log/$name.log" >&2; die "$name died"; fi
    sleep 0.25
  done
  tail -30 "$S/log/$name.log" >&2; die "$name did not answer on $url within ${t}s"
}

# ----------------------------------------------------------------------------- configs
step_configs() {
  mkdir -p "$S"/{etc,run,log,py,mysql,rabbitmq,keystone,glance/images,glance/staging,nova/instances,nova/tmp,neutron/tmp,cinder/tmp,placement,seed,markers}
  chmod 755 "$S"
  # The fake bottom layer (python package + dist-info entry points), loaded via PYTHONPATH.
  local f rel
  while IFS= read -r -d '' f; do
    rel="${f#"$HERE/fakes/"}"
    mkdir -p "$S/py/$(dirname "$rel")"
    put "$S/py/$rel" neutron-server cinder-volume <"$f"
  done < <(find "$HERE/fakes" -type f \( -name '*.py' -o -name '*.txt' -o -name METADATA \) -print0)

  put "$S/etc/my.cnf" mariadb <<EOT
[mysqld]
user = root
datadir = $S/mysql/data
socket = $DBSOCK
pid-file = $S/run/mariadbd.own.pid
skip-networking
skip-name-resolve
log-error = $S/log/mariadb.err
character-set-server = utf8mb3
collation-server = utf8mb3_general_ci
max_connections = 400
performance_schema = OFF
innodb_buffer_pool_size = 96M
innodb_log_file_size = 64M
innodb_flush_log_at_trx_commit = 0
innodb_doublewrite = 0
sync_binlog = 0
skip-log-bin
[client]
socket = $DBSOCK
user = root
EOT

  put "$S/etc/rabbitmq-env.conf" rabbitmq <<EOT
# sourced by rabbitmq-env (RABBITMQ_CONF_ENV_FILE); the names here have no RABBITMQ_ prefix
NODENAME=rabbit@localhost
NODE_IP_ADDRESS=127.0.0.1
NODE_PORT=5672
DIST_PORT=25672
MNESIA_BASE=$S/rabbitmq/mnesia
LOG_BASE=$S/log/rabbitmq
PID_FILE=$S/run/rabbitmq-beam.pid
CONFIG_FILE=$S/etc/rabbitmq
ENABLED_PLUGINS_FILE=$S/etc/rabbitmq-enabled-plugins
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOT
  put "$S/etc/rabbitmq.conf" rabbitmq <<EOT
listeners.tcp.default = 127.0.0.1:5672
loopback_users.guest = true
vm_memory_high_watermark.absolute = 512MiB
disk_free_limit.absolute = 50MB
log.console = true
log.file = false
EOT
  put "$S/etc/rabbitmq-enabled-plugins" rabbitmq <<<"[]."

  put "$S/etc/keystone.conf" keystone <<EOT
[DEFAULT]
[database]
connection = $(db_url keystone)
[token]
provider = fernet
expiration = 86400
[fernet_tokens]
key_repository = $S/keystone/fernet-keys
[fernet_receipts]
key_repository = $S/keystone/fernet-keys
[credential]
key_repository = $S/keystone/credential-keys
[cache]
enabled = true
backend = oslo_cache.dict
[oslo_messaging_notifications]
driver = noop
EOT

  put "$S/etc/placement.conf" placement <<EOT
[DEFAULT]
[api]
auth_strategy = keystone
[placement_database]
connection = $(db_url placement)
$(authtoken placement)
EOT

  put "$S/etc/glance-api.conf" glance-api <<EOT
[DEFAULT]
bind_host = 127.0.0.1
bind_port = 9292
workers = 1
node_staging_uri = file://$S/glance/staging
enabled_import_methods = [glance-direct,web-download]
[database]
connection = $(db_url glance)
$(authtoken glance)
[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini
[glance_store]
stores = file,http
default_store = file
filesystem_store_datadir = $S/glance/images
[oslo_concurrency]
lock_path = $S/glance
[oslo_messaging_notifications]
driver = noop
EOT

  # nova.conf: common to all nova services; nova-db.conf: only api, conductor, scheduler and
  # nova-manage get DB credentials (nova-compute refuses to start with them).
  put "$S/etc/nova.conf" nova-api nova-conductor nova-scheduler nova-compute <<EOT
[DEFAULT]
host = $HOSTNAME_OS
my_ip = 127.0.0.1
state_path = $S/nova
instances_path = $S/nova/instances
transport_url = $RABBIT_URL
compute_driver = fake.FakeDriver
enabled_apis = osapi_compute
osapi_compute_listen = 127.0.0.1
osapi_compute_listen_port = 8774
osapi_compute_workers = 1
heal_instance_info_cache_interval = -1
[api]
auth_strategy = keystone
[wsgi]
api_paste_config = /etc/nova/api-paste.ini
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = 10
[quota]
instances = 500
cores = -1
ram = -1
key_pairs = 500
server_groups = 100
$(authtoken nova)
[service_user]
send_service_user_token = true
$(ks_auth nova)
[placement]
$(ks_auth nova)
valid_interfaces = public
[neutron]
$(ks_auth nova)
valid_interfaces = public
[cinder]
$(ks_auth nova)
os_region_name = $REGION
catalog_info = volumev3::publicURL
[glance]
region_name = $REGION
valid_interfaces = public
[vnc]
enabled = false
[spice]
enabled = false
[oslo_concurrency]
lock_path = $S/nova/tmp
[oslo_messaging_notifications]
driver = noop
EOT
  put "$S/etc/nova-db.conf" nova-api nova-conductor nova-scheduler <<EOT
[api_database]
connection = $(db_url nova_api)
[database]
connection = $(db_url nova)
EOT

  put "$S/etc/neutron.conf" neutron-server <<EOT
[DEFAULT]
host = $HOSTNAME_OS
bind_host = 127.0.0.1
bind_port = 9696
state_path = $S/neutron
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
api_paste_config = /etc/neutron/api-paste.ini
transport_url = $RABBIT_URL
api_workers = 1
rpc_workers = 1
rpc_state_report_workers = 0
allow_overlapping_ips = true
dhcp_agent_notification = false
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = true
[database]
connection = $(db_url neutron)
$(authtoken neutron)
[nova]
$(ks_auth neutron)
endpoint_type = public
[quotas]
quota_network = 200
quota_subnet = 200
quota_port = 1000
quota_router = 50
quota_floatingip = 200
quota_security_group = 100
quota_security_group_rule = 1000
[oslo_concurrency]
lock_path = $S/neutron/tmp
[oslo_messaging_notifications]
driver = noop
[ml2]
type_drivers = flat,vxlan
tenant_network_types = vxlan
mechanism_drivers = cpi_bind_all
extension_drivers = port_security
[ml2_type_flat]
flat_networks = extnet
[ml2_type_vxlan]
vni_ranges = 1:4000
[securitygroup]
enable_security_group = true
EOT

  put "$S/etc/cinder.conf" cinder-api cinder-scheduler cinder-volume <<EOT
[DEFAULT]
host = $HOSTNAME_OS
my_ip = 127.0.0.1
state_path = $S/cinder
transport_url = $RABBIT_URL
auth_strategy = keystone
api_paste_config = /etc/cinder/api-paste.ini
osapi_volume_listen = 127.0.0.1
osapi_volume_listen_port = 8776
osapi_volume_workers = 1
enabled_backends = fake
default_volume_type = cpi-fake
storage_availability_zone = nova
default_availability_zone = nova
glance_api_servers = http://127.0.0.1:9292
quota_volumes = 500
quota_snapshots = 500
quota_gigabytes = -1
quota_backups = 50
[database]
connection = $(db_url cinder)
$(authtoken cinder)
[nova]
$(ks_auth cinder)
interface = public
[service_user]
send_service_user_token = true
$(ks_auth cinder)
[oslo_concurrency]
lock_path = $S/cinder/tmp
[oslo_messaging_notifications]
driver = noop
[fake]
volume_driver = cpi_os_fakes.cinder_fake.ExtendableFakeVolumeDriver
volume_backend_name = fake
EOT
}

# ----------------------------------------------------------------------------- mariadb
mysql_q() { mariadb --defaults-file="$S/etc/my.cnf" -N -B -e "$1"; }

step_mariadb() {
  if [[ ! -d "$S/mysql/data/mysql" ]]; then
    log "initialising MariaDB data dir"
    rm -rf "$S/mysql/data"
    mariadb-install-db --defaults-file="$S/etc/my.cnf" --auth-root-authentication-method=socket \
      --skip-test-db >"$S/log/mariadb-install.log" 2>&1 || { tail -20 "$S/log/mariadb-install.log"; die "mariadb-install-db failed"; }
  fi
  start mariadb /usr/sbin/mariadbd --defaults-file="$S/etc/my.cnf"
  local i
  for ((i = 0; i < 240; i++)); do
    mysql_q 'SELECT 1' >/dev/null 2>&1 && break
    pid_alive mariadb || { tail -20 "$S/log/mariadb.err" >&2; die "mariadbd died"; }
    sleep 0.25
  done
  mysql_q 'SELECT 1' >/dev/null || die "MariaDB did not come up"
  if [[ ! -e "$S/markers/db-users" ]]; then
    local sql="CREATE USER IF NOT EXISTS 'os'@'localhost' IDENTIFIED BY '$DB_PASS';" d
    for d in keystone glance placement nova_api nova nova_cell0 neutron cinder; do
      sql+="CREATE DATABASE IF NOT EXISTS $d; GRANT ALL PRIVILEGES ON $d.* TO 'os'@'localhost';"
    done
    mysql_q "$sql FLUSH PRIVILEGES;"
    touch "$S/markers/db-users"
  fi
}

# ----------------------------------------------------------------------------- rabbitmq
step_rabbitmq() {
  mkdir -p "$S/log/rabbitmq" "$S/rabbitmq/mnesia"
  # Our own epmd, on loopback only (beam would otherwise start one on all interfaces).
  start epmd /usr/bin/epmd -address 127.0.0.1 -port 4369
  SVC_ENV=(HOME="$S/rabbitmq" RABBITMQ_CONF_ENV_FILE="$S/etc/rabbitmq-env.conf"
           ERL_EPMD_ADDRESS=127.0.0.1)
  # rabbit's own node pid file must not be left from a previous life
  pid_alive rabbitmq || rm -f "$S/run/rabbitmq-beam.pid"
  start rabbitmq /usr/lib/rabbitmq/bin/rabbitmq-server
  SVC_ENV=()
}

wait_rabbitmq() {
  local i
  for ((i = 0; i < 480; i++)); do
    if (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then return 0; fi
    pid_alive rabbitmq || { tail -30 "$S/log/rabbitmq.log" >&2; die "rabbitmq died"; }
    sleep 0.25
  done
  die "rabbitmq did not listen on 5672"
}

# ----------------------------------------------------------------------------- keystone
uwsgi_app() {  # uwsgi_app NAME PORT WSGI-FILE ENV=VAL...
  local name="$1" port="$2" file="$3"; shift 3
  local envs=() e
  for e in "$@"; do envs+=(--env "$e"); done
  start "$name" /usr/bin/uwsgi --plugin python3 --http-socket "127.0.0.1:$port" \
    --wsgi-file "$file" --master --processes 1 --threads 8 --enable-threads --lazy-apps \
    --die-on-term --need-app --buffer-size 65535 --add-header 'Connection: close' \
    "${envs[@]}"
}

step_keystone() {
  if [[ ! -e "$S/markers/keystone-db" ]]; then
    log "keystone db_sync + keys + bootstrap"
    ksm() {
      keystone-manage --config-file "$S/etc/keystone.conf" "$@" >>"$S/log/dbsync.log" 2>&1 ||
        { tail -30 "$S/log/dbsync.log" >&2; die "keystone-manage $1 failed"; }
    }
    ksm db_sync
    ksm fernet_setup --keystone-user root --keystone-group root
    ksm credential_setup --keystone-user root --keystone-group root
    ksm bootstrap --bootstrap-password "$ADMIN_PASS" --bootstrap-username admin \
      --bootstrap-project-name admin --bootstrap-role-name admin \
      --bootstrap-service-name keystone --bootstrap-region-id "$REGION" \
      --bootstrap-admin-url "$KS" --bootstrap-internal-url "$KS" --bootstrap-public-url "$KS"
    touch "$S/markers/keystone-db"
  fi
  uwsgi_app keystone 5000 /usr/bin/keystone-wsgi-public "OS_KEYSTONE_CONFIG_FILES=$S/etc/keystone.conf"
}

# ----------------------------------------------------------------------------- db syncs
once() {  # once MARKER CMD...: run CMD unless markers/MARKER exists
  local m="$S/markers/$1"; shift
  [[ -e "$m" ]] && return 0
  log "running: $*"
  "$@" >>"$S/log/dbsync.log" 2>&1 || { tail -40 "$S/log/dbsync.log" >&2; die "failed: $*"; }
  touch "$m"
}

step_dbsync() {
  local nm=(nova-manage --config-file "$S/etc/nova.conf" --config-file "$S/etc/nova-db.conf")
  # independent services in parallel: this is the slow part of a fresh setup
  (
    once glance-db glance-manage --config-file "$S/etc/glance-api.conf" db_sync
  ) & local p1=$!
  (
    once placement-db env OS_PLACEMENT_CONFIG_DIR="$S/etc" placement-manage --config-file "$S/etc/placement.conf" db sync
    once cinder-db cinder-manage --config-file "$S/etc/cinder.conf" db sync
  ) & local p2=$!
  (
    once neutron-db neutron-db-manage --config-file "$S/etc/neutron.conf" upgrade heads
  ) & local p3=$!
  (
    once nova-api-db "${nm[@]}" api_db sync
    once nova-cell0 "${nm[@]}" cell_v2 map_cell0
    if [[ ! -e "$S/markers/nova-cell1" ]]; then
      "${nm[@]}" cell_v2 list_cells 2>/dev/null | grep -q ' cell1 ' ||
        "${nm[@]}" cell_v2 create_cell --name cell1 >>"$S/log/dbsync.log" 2>&1
      touch "$S/markers/nova-cell1"
    fi
    once nova-db "${nm[@]}" db sync
  ) & local p4=$!
  local rc=0 p
  for p in $p1 $p2 $p3 $p4; do wait "$p" || rc=1; done
  [[ $rc -eq 0 ]] || die "a database sync failed (see $S/log/dbsync.log)"
}

# ----------------------------------------------------------------------------- services
step_services() {
  # API services first: they do not call Keystone until a request comes in, so they load
  # (slow on 2 cores) while Keystone starts and is seeded.
  local nova=(--config-file "$S/etc/nova.conf" --config-file "$S/etc/nova-db.conf")
  uwsgi_app placement 8778 /usr/bin/placement-api "OS_PLACEMENT_CONFIG_DIR=$S/etc"
  start glance-api /usr/bin/glance-api --config-file "$S/etc/glance-api.conf"
  start nova-api /usr/bin/nova-api "${nova[@]}"
  SVC_ENV=("PYTHONPATH=$S/py")
  start neutron-server /usr/bin/neutron-server --config-file "$S/etc/neutron.conf"
  SVC_ENV=()
  start cinder-api /usr/bin/cinder-api --config-file "$S/etc/cinder.conf"
}

step_services_rpc() {
  # nova-conductor and nova-scheduler authenticate as "nova" while starting: after seeding.
  local nova=(--config-file "$S/etc/nova.conf" --config-file "$S/etc/nova-db.conf")
  start nova-conductor /usr/bin/nova-conductor "${nova[@]}"
  start nova-scheduler /usr/bin/nova-scheduler "${nova[@]}"
  start cinder-scheduler /usr/bin/cinder-scheduler --config-file "$S/etc/cinder.conf"
}

step_services_late() {
  # nova-compute registers its resource provider at start-up (and only retries a minute
  # later): Keystone users and Placement must answer first.
  wait_http placement http://127.0.0.1:8778/
  start nova-compute "$PY" -c 'import sys; from nova.cmd.compute import main; sys.exit(main())' \
    --config-file "$S/etc/nova.conf"
  SVC_ENV=("PYTHONPATH=$S/py")
  start cinder-volume "$PY" -c 'import sys; from cinder.cmd.volume import main; sys.exit(main())' \
    --config-file "$S/etc/cinder.conf"
  SVC_ENV=()
}

step_wait() {
  wait_http keystone http://127.0.0.1:5000/v3
  wait_http placement http://127.0.0.1:8778/
  wait_http glance-api http://127.0.0.1:9292/versions
  wait_http nova-api http://127.0.0.1:8774/
  wait_http neutron-server http://127.0.0.1:9696/
  wait_http cinder-api http://127.0.0.1:8776/
  local n; for n in nova-conductor nova-scheduler nova-compute cinder-scheduler cinder-volume; do
    pid_alive "$n" || { tail -30 "$S/log/$n.log" >&2; die "$n is not running"; }
  done
}

# ----------------------------------------------------------------------------- seed
seed() { "$PY" "$HERE/seed.py" "$@" --state-dir "$S" --admin-password "$ADMIN_PASS"; }

step_seed_keystone() {
  wait_http keystone http://127.0.0.1:5000/v3
  # done once per version of seed.py (users, services, endpoints do not change by themselves)
  local sum; sum="$(sha256sum "$HERE/seed.py" | cut -c1-64)"
  if [[ "$(cat "$S/markers/seed-keystone" 2>/dev/null)" == "$sum" ]]; then return 0; fi
  seed keystone --service-password "$SVC_PASS"
  echo "$sum" >"$S/markers/seed-keystone"
}

step_seed() {
  local extra=()
  # FakeDriver keeps guests in memory: a restarted nova-compute leaves ghosts in the DB.
  if [[ " ${STARTED[*]} " == *" nova-compute "* && -e "$S/markers/nova-discover-hosts" ]]; then
    extra+=(--purge-stale-servers)
  fi
  seed resources --nova-manage "nova-manage --config-file $S/etc/nova.conf --config-file $S/etc/nova-db.conf" "${extra[@]}"
}

main() {
  if [[ "${1:-}" == "--step" ]]; then shift; "step_$1"; return; fi
  local t0=$SECONDS
  step_install
  step_configs
  step_mariadb
  step_rabbitmq
  step_keystone
  step_dbsync
  step_services
  step_seed_keystone     # waits for Keystone
  step_services_rpc      # these retry until RabbitMQ listens
  wait_rabbitmq
  step_services_late
  step_wait
  step_seed
  log "ready in $((SECONDS - t0))s: $S/cpi-openstack.json"
}

main "$@"
