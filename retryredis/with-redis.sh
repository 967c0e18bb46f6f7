#!/usr/bin/env bash
# with-redis.sh CMD [ARGS...]: runs CMD with RETRY_REDIS_ADDR set to a fresh
# redis-server on a free loopback port, with no persistence, and stops the
# server afterwards whatever CMD's exit status, which it returns.
set -euo pipefail
if [ $# -eq 0 ]; then
	echo "usage: $0 command [args...]" >&2
	exit 2
fi
command -v redis-server >/dev/null || { echo "with-redis.sh: redis-server not found (apt-get install redis-server)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "with-redis.sh: redis-cli not found (apt-get install redis-tools)" >&2; exit 1; }

dir=$(mktemp -d)
pid=
cmd=
cleanup() {
	if [ -n "$cmd" ] && kill -0 "$cmd" 2>/dev/null; then
		kill "$cmd" 2>/dev/null || true
	fi
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A free port: a random one; if it is taken, redis-server exits and we try
# another.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	port=$((20000 + RANDOM % 30000))
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--dir "$dir" --logfile "$dir/redis.log" --daemonize no &
	pid=$!
	for _ in $(seq 100); do
		if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
			break 2
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
done
if [ -z "$pid" ]; then
	echo "with-redis.sh: redis-server did not answer PING" >&2
	cat "$dir/redis.log" >&2 2>/dev/null || true
	exit 1
fi

export RETRY_REDIS_ADDR="127.0.0.1:$port"
echo "with-redis.sh: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $RETRY_REDIS_ADDR" >&2
# In the background, so that a signal to this script stops the server (and
# the command) at once rather than when the command ends.
status=0
"$@" &
cmd=$!
wait "$cmd" || status=$?
cmd=
exit "$status"
