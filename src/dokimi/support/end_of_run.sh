#!/bin/sh
# dokimi's end-of-run wrapper, the agent container's command: /bin/sh end_of_run.sh MARKER -- HARNESS ARGV...
#
# It runs the harness, passes SIGTERM/SIGINT/SIGHUP on to it, and once the harness has exited ends every
# other process of this uid in the container (kill -1: whatever the agent left behind, a server, a process
# writing into the container's stdout), then prints "MARKER RC" on a line of its own. dokimi reads the trace
# up to that line only: anything after it arrived after the harness exited and is dropped and counted.
# POSIX sh only: it runs in any image.
marker="$1"
shift
[ "$1" = "--" ] && shift
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
rc=0
while :; do
    wait "$child"
    rc=$?
    kill -0 "$child" 2>/dev/null || break
done
trap '' TERM INT HUP
kill -s KILL -1 2>/dev/null
printf '\n%s %s\n' "$marker" "$rc"
exit "$rc"
