#!/usr/bin/env bash
# A cluster on one machine: N hosts as Linux network namespaces on a bridge, each with its own
# address, host name and TCP stack, their links shaped with tc; Open MPI starts ranks in them
# through an `ip netns exec` launch agent (in place of ssh), so `mpirun --hostfile` and
# `nntile-lab train --hostfile` take the real multi-host path. Needs root (CAP_NET_ADMIN).
#
#   scripts/cluster.sh up N [--gbit G] [--latency-us L] [--slots S] [--name NAME] [--owner PID]
#   scripts/cluster.sh down [--name NAME]          # idempotent
#   scripts/cluster.sh status [--name NAME]
#   scripts/cluster.sh shape HOST [--gbit G] [--latency-us L]   # reshape one host's link
#   scripts/cluster.sh link HOST down|up           # `ip link set eth0 down` inside HOST
#   scripts/cluster.sh kill HOST [SIGNAL]          # SIGKILL (default) HOST's ranks
#   scripts/cluster.sh gc                          # remove clusters whose --owner has exited
#
# What `up` makes (NAME defaults to "nl"; K is the first free 10.213.K.0/24 subnet):
#   hosts NAME-h1 .. NAME-hN   namespaces; eth0 = 10.213.K.i/24; own UTS host name per rank
#   bridge nlc-NAME            10.213.K.254/24 in this (the root) namespace, where mpirun runs
#   links                      each host's eth0 (what it sends) and its bridge port (what it
#                              receives) shaped to G Gbit/s with tbf; L µs more one-way latency
#                              with netem where the kernel has it (CONFIG_NET_SCH_NETEM)
#   $NNTILE_CLUSTER_ROOT/NAME/ (default /run/nntile-cluster) the hostfile, the launch agent,
#                              env (shell variables); the hostfile carries the Open MPI
#                              settings its hosts need as "# mca KEY VALUE" comment lines,
#                              which `nntile-lab` passes to mpirun (and prints for plain mpirun)
#
# Only TCP over the cluster's subnet joins the ranks: btl tcp,self (no shared memory between
# hosts) with btl_tcp_if_include and oob_tcp_if_include set to the subnet. The hosts share this
# machine's cores, so a rank waiting for messages yields its core (mpi_yield_when_idle; Open
# MPI does so by itself only when it sees more ranks than slots on one host). Failure detection
# fit for tests: Open MPI's daemon links send keepalives after 2 s idle (every 1 s, 3 missed =
# lost) and every host's TCP gives up a connection after tcp_retries2=5 (~13 s) of
# unacknowledged retransmissions, so a host whose link goes down is noticed within ~15 s.
set -euo pipefail

ROOT=${NNTILE_CLUSTER_ROOT:-/run/nntile-cluster}
PREFIX=10.213

die() { echo "cluster.sh: $*" >&2; exit 2; }
usage() { sed -n '7,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, tc): run it as root or with sudo"
    command -v ip >/dev/null || die "'ip' is missing: apt-get install iproute2 (scripts/setup.sh test)"
    command -v tc >/dev/null || die "'tc' is missing: apt-get install iproute2 (scripts/setup.sh test)"
    command -v unshare >/dev/null || die "'unshare' is missing: apt-get install util-linux"
}

# Can this machine make the pieces? Answers with the reason when it cannot.
probe() {
    local ns="nlprobe$$" why=""
    if ! out=$(ip netns add "$ns" 2>&1); then
        why="cannot create a network namespace ('ip netns add' said: $out). Needs root with "
        why+="CAP_SYS_ADMIN and CAP_NET_ADMIN, a kernel with CONFIG_NET_NS, and a writable "
        why+="/run/netns (in a container: --privileged, or --cap-add SYS_ADMIN,NET_ADMIN)"
        die "$why"
    fi
    if ! out=$(ip link add "nlprobe$$" type veth peer name eth0 netns "$ns" 2>&1); then
        ip netns del "$ns" 2>/dev/null || true
        die "cannot create a veth pair into a namespace ('ip link add' said: $out; the kernel needs CONFIG_VETH)"
    fi
    if ! out=$(tc qdisc add dev "nlprobe$$" root tbf rate 1gbit burst 100000 latency 20ms 2>&1); then
        ip link del "nlprobe$$" 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
        die "cannot shape a link with tc tbf ('tc' said: $out; the kernel needs CONFIG_NET_SCH_TBF)"
    fi
    ip link del "nlprobe$$" 2>/dev/null || true
    ip netns del "$ns"
}

has_netem() {
    local ok=1
    ip link add "nlnetem$$" type veth peer name "nlnetem$$p" 2>/dev/null || return 1
    tc qdisc add dev "nlnetem$$" root netem delay 1us 2>/dev/null || ok=0
    ip link del "nlnetem$$" 2>/dev/null || true
    [ "$ok" -eq 1 ]
}

valid_name() { [[ $1 =~ ^[a-z][a-z0-9]{0,5}$ ]] || die "--name '$1': 1-6 lower-case letters/digits, starting with a letter"; }
positive() { [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v v="$2" 'BEGIN{exit !(v > 0)}' || die "$1 '$2': give a number > 0"; }
nonneg() { [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 '$2': give a number >= 0"; }

# tbf on DEV (in namespace NS, or the root one if NS is empty) at G Gbit/s; netem first when
# L µs of latency are asked for. Burst: 20 µs of traffic, at least two full frames — a real
# link sends every byte at its rate, and a bucket of 64 KiB let messages below it pass at
# memory speed, bending the α-β line (tbf splits larger GSO segments, costing a little CPU).
# Queue: 20 ms of traffic.
shape_dev() {
    local ns=$1 dev=$2 gbit=$3 lat=$4 run=() burst
    [ -n "$ns" ] && run=(ip netns exec "$ns")
    "${run[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
    burst=$(awk -v g="$gbit" 'BEGIN{b = g * 1e9 / 8 * 20e-6; if (b < 3200) b = 3200; printf "%d", b}')
    if awk -v l="$lat" 'BEGIN{exit !(l > 0)}'; then
        "${run[@]}" tc qdisc add dev "$dev" root handle 1: netem delay "${lat}us" limit 100000
        "${run[@]}" tc qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "${gbit}gbit" \
            burst "$burst" latency 20ms
    else
        "${run[@]}" tc qdisc add dev "$dev" root tbf rate "${gbit}gbit" burst "$burst" latency 20ms
    fi
}

cluster_of() {   # HOST (NAME-hI) -> name=NAME
    [[ $1 =~ ^([a-z][a-z0-9]{0,5})-h[0-9]+$ ]] || die "host '$1': a cluster host is named NAME-hI (e.g. nl-h2)"
    name=${BASH_REMATCH[1]}
}

load() {   # the settings of cluster $name
    local f="$ROOT/$name/env"
    [ -f "$f" ] || die "no cluster '$name' (scripts/cluster.sh up N --name $name)"
    # shellcheck disable=SC1090
    . "$f"
}

host_index() {   # HOST -> i, checking it is one of cluster $name's
    local host=$1
    [[ $host =~ ^${name}-h([0-9]+)$ ]] || die "host '$host' is not one of cluster '$name''s ($name-h1..$name-h$NNTILE_CLUSTER_HOSTS)"
    local i=${BASH_REMATCH[1]}
    ((i >= 1 && i <= NNTILE_CLUSTER_HOSTS)) || die "host '$host': cluster '$name' has $name-h1..$name-h$NNTILE_CLUSTER_HOSTS"
    echo "$i"
}

cmd_up() {
    local n="" gbit=1 lat=0 slots=1 owner=""
    while (($#)); do
        case $1 in
            --gbit) positive --gbit "${2:-}"; gbit=$2; shift 2 ;;
            --latency-us) nonneg --latency-us "${2:-}"; lat=$2; shift 2 ;;
            --slots) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--slots '${2:-}': give an integer >= 1"; slots=$2; shift 2 ;;
            --name) valid_name "${2:-}"; name=$2; shift 2 ;;
            --owner) [[ ${2:-} =~ ^[0-9]+$ ]] || die "--owner '${2:-}': give a process id"; owner=$2; shift 2 ;;
            -*) die "up: unknown option '$1'" ;;
            *) [ -z "$n" ] || die "up: one host count, got '$n' and '$1'"; n=$1; shift ;;
        esac
    done
    [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "up N: give a host count from 1 to 200 (got '${n}')"
    need_root
    mkdir -p "$ROOT"
    exec 9>"$ROOT/.lock"
    flock 9
    [ ! -e "$ROOT/$name/env" ] || die "cluster '$name' is up already (scripts/cluster.sh down --name $name)"
    probe
    if awk -v l="$lat" 'BEGIN{exit !(l > 0)}' && ! has_netem; then
        die "--latency-us $lat: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set; 'tc qdisc add ... netem' fails), so links can be shaped in bandwidth only (tbf): leave out --latency-us, or run on a kernel with netem"
    fi
    local k="" c
    for c in $(seq 1 254); do
        if ! ip -4 -o addr show | grep -q " $PREFIX\.$c\." && ! grep -qsx "NNTILE_CLUSTER_SUBNET=$PREFIX.$c.0/24" "$ROOT"/*/env; then
            k=$c; break
        fi
    done
    [ -n "$k" ] || die "no free subnet $PREFIX.K.0/24 left"
    local dir="$ROOT/$name" br="nlc-$name" subnet="$PREFIX.$k.0/24"
    mkdir -p "$dir"
    cat >"$dir/env" <<EOF
NNTILE_CLUSTER_NAME=$name
NNTILE_CLUSTER_HOSTS=$n
NNTILE_CLUSTER_SUBNET=$subnet
NNTILE_CLUSTER_BRIDGE=$br
NNTILE_CLUSTER_GBIT=$gbit
NNTILE_CLUSTER_LATENCY_US=$lat
NNTILE_CLUSTER_OWNER=$owner
NNTILE_CLUSTER_HOSTFILE=$dir/hostfile
EOF
    # from here on a failure takes down what was made
    trap 'echo "cluster.sh: up failed; removing what was made" >&2; flock -u 9; cmd_down >/dev/null 2>&1 || true' ERR
    ip link add "$br" type bridge
    ip addr add "$PREFIX.$k.254/24" dev "$br"
    ip link set "$br" up
    local i host port
    for i in $(seq 1 "$n"); do
        host="$name-h$i" port="$br-$i"
        ip netns add "$host"
        ip link add "$port" type veth peer name eth0 netns "$host"
        ip link set "$port" master "$br" up
        ip -n "$host" addr add "$PREFIX.$k.$i/24" dev eth0
        ip -n "$host" link set lo up
        ip -n "$host" link set eth0 up
        # a connection whose segments go unacknowledged ends after ~13 s, not ~15 min
        ip netns exec "$host" sh -c "echo 5 > /proc/sys/net/ipv4/tcp_retries2"
        shape_dev "$host" eth0 "$gbit" "$lat"     # what the host sends
        shape_dev "" "$port" "$gbit" 0            # what it receives (the bridge's port)
    done
    # Open MPI's launch agent: "agent HOST COMMAND..." runs COMMAND (a shell line, as ssh
    # would) in HOST's namespace, under HOST's own host name
    cat >"$dir/agent" <<'EOF'
#!/bin/sh
# plm_rsh_agent for scripts/cluster.sh's hosts: like ssh HOST COMMAND..., into a namespace
host=$1; shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$1" && shift && eval "$*"' agent "$host" "$@"
EOF
    chmod +x "$dir/agent"
    {
        echo "# nntile-lab cluster '$name': $n hosts on bridge $br, $subnet, ${gbit} Gbit/s, +${lat} us (scripts/cluster.sh)"
        echo "# Open MPI settings these hosts need (nntile-lab passes them to mpirun):"
        echo "# mca plm_rsh_agent $dir/agent"
        echo "# mca pml ob1"
        echo "# mca btl tcp,self"
        echo "# mca btl_tcp_if_include $subnet"
        echo "# mca oob_tcp_if_include $subnet"
        echo "# mca oob_tcp_keepalive_time 2"
        echo "# mca oob_tcp_keepalive_intvl 1"
        echo "# mca oob_tcp_keepalive_probes 3"
        echo "# mca mpi_yield_when_idle 1"
        for i in $(seq 1 "$n"); do echo "$name-h$i slots=$slots"; done
    } >"$dir/hostfile.tmp"
    mv "$dir/hostfile.tmp" "$dir/hostfile"
    trap - ERR
    echo "cluster '$name': $n hosts ($name-h1..$name-h$n) on $subnet, ${gbit} Gbit/s, +${lat} us"
    echo "hostfile: $dir/hostfile"
}

cmd_down() {
    local dir="$ROOT/$name" br="nlc-$name" ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-h[0-9]+$" || true); do
        # the host's processes first (a rank left in a deleted namespace keeps it alive)
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$br" 2>/dev/null || true
    rm -rf "$dir"
    echo "cluster '$name' is down"
}

cmd_status() {
    load
    echo "cluster '$name': $NNTILE_CLUSTER_HOSTS hosts on $NNTILE_CLUSTER_SUBNET (bridge $NNTILE_CLUSTER_BRIDGE), ${NNTILE_CLUSTER_GBIT} Gbit/s, +${NNTILE_CLUSTER_LATENCY_US} us"
    echo "hostfile: $NNTILE_CLUSTER_HOSTFILE"
    local i
    for i in $(seq 1 "$NNTILE_CLUSTER_HOSTS"); do
        ip -n "$name-h$i" -br addr show eth0 | sed "s/^/  $name-h$i /"
        ip netns exec "$name-h$i" tc qdisc show dev eth0 | sed 's/^/      /'
    done
}

cmd_shape() {
    local host=${1:-} gbit="" lat=""
    [ -n "$host" ] || usage
    shift
    while (($#)); do
        case $1 in
            --gbit) positive --gbit "${2:-}"; gbit=$2; shift 2 ;;
            --latency-us) nonneg --latency-us "${2:-}"; lat=$2; shift 2 ;;
            *) die "shape: unknown option '$1'" ;;
        esac
    done
    need_root
    cluster_of "$host"
    load
    local i
    i=$(host_index "$host")
    gbit=${gbit:-$NNTILE_CLUSTER_GBIT}
    lat=${lat:-$NNTILE_CLUSTER_LATENCY_US}
    if awk -v l="$lat" 'BEGIN{exit !(l > 0)}' && ! has_netem; then
        die "--latency-us $lat: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set)"
    fi
    shape_dev "$host" eth0 "$gbit" "$lat"
    shape_dev "" "$NNTILE_CLUSTER_BRIDGE-$i" "$gbit" 0
    echo "$host: ${gbit} Gbit/s, +${lat} us"
}

cmd_link() {
    local host=${1:-} state=${2:-}
    [[ $state == up || $state == down ]] || die "link HOST up|down (got '$state')"
    shift 2
    (($#)) && die "link: unknown option '$1'"
    need_root
    cluster_of "$host"
    load
    host_index "$host" >/dev/null
    ip -n "$host" link set eth0 "$state"
    echo "$host: eth0 $state"
}

cmd_kill() {
    local host=${1:-} sig=${2:-KILL}
    [ -n "$host" ] || usage
    shift; (($#)) && shift
    (($#)) && die "kill: unknown option '$1'"
    need_root
    cluster_of "$host"
    load
    host_index "$host" >/dev/null
    local pid n=0
    for pid in $(ip netns pids "$host"); do
        # the ranks, not Open MPI's daemon (orted) nor the agent's shell
        case $(cat "/proc/$pid/comm" 2>/dev/null) in orted|sh|"") continue ;; esac
        kill "-$sig" "$pid" 2>/dev/null && n=$((n + 1))
    done
    echo "$host: SIG$sig to $n process(es)"
}

cmd_gc() {
    need_root
    local d owner
    for d in "$ROOT"/*/; do
        [ -f "$d/env" ] || continue
        owner=$(sed -n 's/^NNTILE_CLUSTER_OWNER=//p' "$d/env")
        if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
            name=$(basename "$d") cmd_down
        fi
    done
}

name=nl
sub=${1:-}
(($#)) && shift
case $sub in
    up) cmd_up "$@" ;;
    down)
        while (($#)); do
            case $1 in --name) valid_name "${2:-}"; name=$2; shift 2 ;; *) die "down: unknown option '$1'" ;; esac
        done
        need_root; cmd_down ;;
    status)
        while (($#)); do
            case $1 in --name) valid_name "${2:-}"; name=$2; shift 2 ;; *) die "status: unknown option '$1'" ;; esac
        done
        cmd_status ;;
    shape) cmd_shape "$@" ;;
    link) cmd_link "$@" ;;
    kill) cmd_kill "$@" ;;
    gc) cmd_gc ;;
    *) usage ;;
esac
