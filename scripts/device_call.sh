#!/usr/bin/env bash
# One device-tool call made of several scripts/device.sh runs, each under its own time limit, their logs packed into
# one archive after every run: the device tool brings back only a few files from $OUT, so everything lands in
# $OUT/logs.tgz (unpack it here: tar xzf <files_at>/logs.tgz), and a call cut short by its limit still returns what
# the runs before finished. Each argument is "SECONDS|[VAR=value ...] [BUILD_DIR] STEP ...", e.g.
#   bash scripts/device_call.sh "120|TESTS_FILTER=*GpuLinear* .carry/bin tests" "90|WORKLOAD=flux1-1024 .carry/bin layer_ab"
# Each run's output goes to <n>.txt in the archive (and its last 1500 bytes to stdout); AOT defaults to .carry/pkg90.
# Exit status: 0 when every run exited 0.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
root=${OUT:-.out}; mkdir -p "$root"; root=$(cd "$root" && pwd)
# The logs live outside $OUT (the device tool returns the first few files of $OUT by name: the archive must be the
# only one there).
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
export AOT=${AOT:-.carry/pkg90}
status=0 n=0
for spec in "$@"; do
  n=$((n + 1))
  case $spec in *'|'*) ;; *) echo "device_call.sh: argument $n ('$spec') is not SECONDS|COMMAND" >&2; exit 2 ;; esac
  limit=${spec%%|*} rest=${spec#*|}
  [[ $limit =~ ^[0-9]+$ ]] || { echo "device_call.sh: argument $n: '$limit' is not a number of seconds" >&2; exit 2; }
  read -r -a words <<< "$rest"
  vars=()
  while [ ${#words[@]} -gt 0 ] && [[ ${words[0]} == [A-Za-z_]*=* ]]; do vars+=("${words[0]}"); words=("${words[@]:1}"); done
  echo "##### $n: $rest (limit $limit s, $(date -u +%T))"
  timeout "$limit" env "${vars[@]}" OUT="$logs/$n" bash scripts/device.sh "${words[@]}" > "$logs/$n.txt" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || status=1
  echo "##### $n: exit $rc$([ "$rc" -eq 124 ] && echo ' (its limit)')"
  tail -c 1500 "$logs/$n.txt"
  tar czf "$root/logs.tgz" -C "$logs" .
done
exit $status
