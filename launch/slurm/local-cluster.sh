#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for tests and demos: munged, slurmctld and
# slurmd started by hand (no systemd), each in its own session, with all state, logs and PIDs
# under one directory, and stopped by those PIDs only.
#
#   launch/slurm/local-cluster.sh start  <state-dir>   # writes slurm.conf, starts, waits for idle
#   launch/slurm/local-cluster.sh status <state-dir>
#   launch/slurm/local-cluster.sh stop   <state-dir>
#   launch/slurm/local-cluster.sh env    <state-dir>   # prints "export SLURM_CONF=..." for clients
#
# Clients (srun, sbatch, squeue, scontrol) find the cluster through SLURM_CONF=<state-dir>/slurm.conf.
# Ports: RECMIX_SLURM_PORT (slurmctld, default 6817) and the next one (slurmd), on 127.0.0.1 only
# (srun and slurmstepd too); munged answers on a Unix socket in the state directory.
# Needs Debian's slurm-wlm and munge (scripts/install-deps.sh --with-slurm).
set -euo pipefail

die() { echo "local-cluster: $*" >&2; exit 1; }
log() { echo "local-cluster: $*"; }

(($# == 2)) || die "usage: $0 start|stop|status|env <state-dir>"
action=$1
mkdir -p "$2"
state=$(cd "$2" && pwd)
conf="$state/slurm.conf"
export SLURM_CONF="$conf"
port=${RECMIX_SLURM_PORT:-6817}
node=$(hostname -s)
munge_socket="$state/munge/munge.socket"
((${#munge_socket} < 100)) || die "state directory path too long for a socket ($munge_socket); use a shorter one, e.g. under /tmp"

# Expected /proc/PID/comm of each daemon (a PID file never makes us kill anything else).
declare -A comm_of=([munged]=munged [slurmctld]=slurmctld [slurmd]=slurmd)

pid_of() {  # prints the recorded PID of $1 when that process is still the daemon, else nothing
  local name=$1 file="$state/pids/$1.pid" pid
  [[ -r "$file" ]] || return 0
  pid=$(<"$file")
  [[ "$pid" =~ ^[0-9]+$ && -r /proc/$pid/comm ]] || return 0
  [[ "$(</proc/"$pid"/comm)" == "${comm_of[$name]}" ]] && echo "$pid"
  return 0
}

wait_for() {  # wait_for <seconds> <description> <command...>: polls every 0.2 s
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# Starts a daemon in its own session; setsid does not fork when the caller is not a process
# group leader (true for a background job of a script), so $! is the daemon itself.
start_daemon() {  # start_daemon <name> <command...>
  local name=$1
  shift
  setsid "$@" >"$state/log/$name.out" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$state/pids/$name.pid"
  sleep 0.1
  [[ -n "$(pid_of "$name")" ]] || { tail -20 "$state/log/$name.out" >&2 || true; die "$name exited at start (logs in $state/log)"; }
}

write_conf() {
  local cpus mem user
  cpus=$(nproc)
  # RealMemory as slurmd measures it; a little under what it reports, so the node is not drained.
  mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  mem=$(( ${mem:-1024} * 95 / 100 ))
  user=$(id -un)
  cat >"$conf" <<EOF
# Written by launch/slurm/local-cluster.sh: one node, no cgroups, no accounting.
ClusterName=recmix-local
SlurmctldHost=${node}(127.0.0.1)
SlurmctldPort=${port}
SlurmdPort=$((port + 1))
# Loopback only: slurmctld binds to its ControlAddr (127.0.0.1 above), slurmd, srun and the other
# daemons and clients to the node's NodeAddr (127.0.0.1 below) instead of every address.
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=${user}
SlurmdUser=${user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${munge_socket}
StateSaveLocation=${state}/ctld
SlurmdSpoolDir=${state}/slurmd
SlurmctldPidFile=${state}/run/slurmctld.pid
SlurmdPidFile=${state}/run/slurmd.pid
SlurmctldLogFile=${state}/log/slurmctld.log
SlurmdLogFile=${state}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# A one-node cluster for tests and demos: the main scheduling loop and the backfill pass run every
# second instead of every 60 s and 30 s, so that a requeued job or one held to a start time starts
# as soon as it may.
SchedulerParameters=sched_interval=1,bf_interval=1
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=local Nodes=${node} Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  for bin in munged munge slurmctld slurmd scontrol sinfo; do
    command -v "$bin" >/dev/null || die "$bin not found (install slurm-wlm and munge: scripts/install-deps.sh --with-slurm)"
  done
  for name in munged slurmctld slurmd; do
    [[ -z "$(pid_of "$name")" ]] || die "$name is already running for $state (pid $(pid_of "$name")); stop it first"
  done
  if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
    die "port $port is in use (another cluster?); set RECMIX_SLURM_PORT to a free port"
  fi
  mkdir -p "$state"/{ctld,slurmd,run,log,pids,munge}
  write_conf

  # munge: a key private to this cluster, its own socket; as root the daemon runs as user munge.
  local as_munge=()
  if [[ $(id -u) -eq 0 ]]; then
    id munge >/dev/null 2>&1 || die "user munge does not exist (install the munge package)"
    as_munge=(setpriv --reuid=munge --regid=munge --init-groups)
  fi
  if [[ ! -s "$state/munge/munge.key" ]]; then
    (umask 077; head -c 1024 /dev/urandom >"$state/munge/munge.key")
  fi
  chmod 700 "$state/munge"
  chmod 600 "$state/munge/munge.key"
  if [[ $(id -u) -eq 0 ]]; then
    chown -R munge:munge "$state/munge"
    chmod o+x "$state"  # munge must reach its own directory (mktemp -d makes 0700)
    "${as_munge[@]}" test -w "$state/munge" ||
      die "user munge cannot write $state/munge (a parent directory is closed to it); use a state directory under /tmp"
  fi
  start_daemon munged "${as_munge[@]}" munged --foreground --force --socket="$munge_socket" \
    --key-file="$state/munge/munge.key" --pid-file="$state/munge/munged.pid" \
    --log-file="$state/munge/munged.log" --seed-file="$state/munge/munged.seed"
  wait_for 10 "munge" bash -c "munge -n -S '$munge_socket' | unmunge -S '$munge_socket'" ||
    die "munged does not answer on $munge_socket (log: $state/munge/munged.log)"

  start_daemon slurmctld slurmctld -D -c -f "$conf"
  wait_for 20 "slurmctld" bash -c "scontrol ping | grep -q UP" ||
    die "slurmctld does not answer scontrol ping (log: $state/log/slurmctld.log)"

  start_daemon slurmd slurmd -D -f "$conf"
  wait_for 30 "slurmd" bash -c "sinfo -h -N -o %T | grep -qx idle" ||
    die "the node did not become idle: $(sinfo -h -N -o '%T %E' 2>&1) (log: $state/log/slurmd.log)"
  log "up: node $node ($(nproc) CPUs) idle; export SLURM_CONF=$conf"
}

alive() {  # alive <pid> <name>: the process exists, is that daemon, and is not a zombie
  local stat
  [[ "$(cat /proc/"$1"/comm 2>/dev/null)" == "$2" ]] || return 1
  stat=$(cat /proc/"$1"/stat 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]
}

stop_daemons() {  # TERM the named daemons together, wait up to 10 s, then KILL; recorded PIDs only
  local name pid pids=() names=()
  for name in "$@"; do
    pid=$(pid_of "$name")
    rm -f "$state/pids/$name.pid"
    [[ -n "$pid" ]] || continue
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid") names+=("$name")
  done
  local i left
  for _ in $(seq 100); do
    left=0
    for i in "${!pids[@]}"; do alive "${pids[$i]}" "${comm_of[${names[$i]}]}" && left=1; done
    ((left)) || break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if alive "${pids[$i]}" "${comm_of[${names[$i]}]}"; then
      kill -KILL "${pids[$i]}" 2>/dev/null || true
      log "killed ${names[$i]} (pid ${pids[$i]}) after 10 s"
    else
      log "stopped ${names[$i]} (pid ${pids[$i]})"
    fi
  done
}

stop() {
  [[ -d "$state/pids" ]] || { log "nothing recorded in $state"; return 0; }
  # End the jobs first so that no job step outlives its slurmd.
  if [[ -n "$(pid_of slurmctld)" && -n "$(squeue -h -o %i 2>/dev/null)" ]]; then
    scancel --partition=local >/dev/null 2>&1 || true
    wait_for 10 "jobs" bash -c '[[ -z "$(squeue -h -o %i 2>/dev/null)" ]]' || true
  fi
  stop_daemons slurmd
  stop_daemons slurmctld munged
}

status() {
  local rc=0
  for name in munged slurmctld slurmd; do
    local pid
    pid=$(pid_of "$name")
    if [[ -n "$pid" ]]; then echo "$name: running (pid $pid)"; else echo "$name: not running"; rc=3; fi
  done
  if ((rc == 0)); then
    sinfo -N -o '%N %T %C' 2>&1 | sed 's/^/  /'
  fi
  return $rc
}

case "$action" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) die "unknown action '$action' (start, stop, status, env)" ;;
esac
