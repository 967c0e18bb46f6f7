#!/usr/bin/env bash
# with-redis-cluster.sh CMD [ARGS...]: runs CMD with RETRY_REDIS_CLUSTER set
# to the addresses, comma-separated, of a fresh Redis Cluster of six
# redis-server nodes on free loopback ports (three masters, each with a
# replica; no persistence; a node timeout of one second; DEBUG allowed from
# loopback, for tests that stall a node), and stops every node afterwards
# whatever CMD's exit status, which it returns.
#
# RETRY_REDIS_CLUSTER_DIR is the directory that holds each node's files in
# a directory named after its port: redis.conf, redis.pid (written by the
# node), nodes.conf and redis.log. A test that kills a node brings it back
# with `redis-server DIR/PORT/redis.conf --daemonize yes`: it rejoins the
# cluster from its nodes.conf, and the cleanup stops it by its redis.pid.
set -euo pipefail
if [ $# -eq 0 ]; then
	echo "usage: $0 command [args...]" >&2
	exit 2
fi
command -v redis-server >/dev/null || { echo "with-redis-cluster.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "with-redis-cluster.sh: redis-cli not found (apt-get install redis-tools)" >&2; exit 1; }

dir=$(mktemp -d)
ports=()    # of the nodes started
children=() # their process ids, as this script started them
cmd=

# running reports whether process $1 exists and has not exited: a child
# that exited stays a zombie until it is waited for.
running() {
	local stat
	stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $stat != Z* ]]
}

# node_pids prints the process id of every node: the children, and any node
# a test restarted (daemonized, so known only by its pid file), provided
# that process is still a redis-server; a pid file left by a killed node
# may name a process that has taken the number since.
node_pids() {
	local port pid
	for pid in "${children[@]}"; do
		echo "$pid"
	done
	for port in "${ports[@]}"; do
		pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
		if [[ $pid =~ ^[0-9]+$ ]] && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = redis-server ]; then
			echo "$pid"
		fi
	done
}

cleanup() {
	if [ -n "$cmd" ] && kill -0 "$cmd" 2>/dev/null; then
		kill "$cmd" 2>/dev/null || true
	fi
	local pids pid alive
	mapfile -t pids < <(node_pids | sort -u)
	if [ ${#pids[@]} -gt 0 ]; then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		for _ in $(seq 50); do
			alive=
			for pid in "${pids[@]}"; do
				if running "$pid"; then alive=1; fi
			done
			[ -z "$alive" ] && break
			sleep 0.1
		done
		for pid in "${pids[@]}"; do
			if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
		done
		for pid in "${children[@]}"; do
			wait "$pid" 2>/dev/null || true
		done
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_node starts a node on a free port and adds it to ports and
# children: a random port whose cluster bus port (the port plus 10000) is
# free too; if either is taken, redis-server exits and we try another.
start_node() {
	local port pid conf
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		port=$((20000 + RANDOM % 30000))
		[ -e "$dir/$port" ] && continue
		mkdir "$dir/$port"
		conf="$dir/$port/redis.conf"
		cat >"$conf" <<-EOF
			bind 127.0.0.1
			port $port
			dir $dir/$port
			logfile $dir/$port/redis.log
			pidfile $dir/$port/redis.pid
			daemonize no
			save ""
			appendonly no
			cluster-enabled yes
			cluster-config-file $dir/$port/nodes.conf
			cluster-node-timeout 1000
			enable-debug-command local
			repl-diskless-sync-delay 0
			repl-ping-replica-period 1
		EOF
		redis-server "$conf" &
		pid=$!
		# The node that answers must be this one, not a server that held
		# the port already.
		for _ in $(seq 100); do
			if [ "$(redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null | tr -d '\r' |
				sed -n 's/^process_id://p')" = "$pid" ]; then
				ports+=("$port")
				children+=("$pid")
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		mv "$dir/$port/redis.log" "$dir/failed.log" 2>/dev/null || true
		rm -rf "${dir:?}/$port"
	done
	echo "with-redis-cluster.sh: redis-server did not start" >&2
	cat "$dir/failed.log" >&2 2>/dev/null || true
	return 1
}

for _ in 1 2 3 4 5 6; do
	start_node
done
addrs=()
for port in "${ports[@]}"; do
	addrs+=("127.0.0.1:$port")
done
if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
	echo "with-redis-cluster.sh: redis-cli --cluster create failed:" >&2
	cat "$dir/create.log" >&2
	exit 1
fi

# Every node must see the whole cluster serving every slot, and list each
# master with its replica in CLUSTER SLOTS, which leaves a replica out until
# its replication offset has moved (the master's pings move it, every
# repl-ping-replica-period); 30 s is far more than six nodes on one machine
# take.
for port in "${ports[@]}"; do
	for i in $(seq 300); do
		info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null || true)
		listed=$(redis-cli -h 127.0.0.1 -p "$port" cluster slots 2>/dev/null | grep -c '^127\.0\.0\.1$' || true)
		if [[ $info == *cluster_state:ok* && $info == *cluster_known_nodes:6* ]] && [ "$listed" = 6 ]; then
			break
		fi
		if [ "$i" -eq 300 ]; then
			echo "with-redis-cluster.sh: node 127.0.0.1:$port does not report cluster_state:ok and six nodes serving slots:" >&2
			echo "$info" >&2
			redis-cli -h 127.0.0.1 -p "$port" cluster nodes >&2 || true
			exit 1
		fi
		sleep 0.1
	done
done

RETRY_REDIS_CLUSTER=$(IFS=,; echo "${addrs[*]}")
export RETRY_REDIS_CLUSTER
export RETRY_REDIS_CLUSTER_DIR="$dir"
version=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
echo "with-redis-cluster.sh: a cluster of six redis-server $version on $RETRY_REDIS_CLUSTER" >&2
# In the background, so that a signal to this script stops the nodes (and
# the command) at once rather than when the command ends.
status=0
"$@" &
cmd=$!
wait "$cmd" 2>/dev/null || status=$? # quiet: a node a test killed is no news
cmd=
exit "$status"
