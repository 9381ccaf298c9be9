#!/usr/bin/env bash
# Runs make targets side by side ("lanes"), each into its own log under $LANE_LOGS.
# A lane's log is printed whole as soon as the lane ends; when all have ended, a summary
# closes the output: one line per lane, then, for each lane that failed, the lines that
# say what failed (the last lines are the ones a CI log keeps).
set -u
logs=${LANE_LOGS:-build/lanes}
mkdir -p "$logs"
declare -A lane_of
for lane in "$@"; do
  (
    started=$(date +%s)
    make --no-print-directory "$lane" >"$logs/$lane.log" 2>&1
    rc=$?
    echo "$rc $(($(date +%s) - started))" >"$logs/$lane.status"
    exit "$rc"
  ) &
  lane_of[$!]=$lane
done

while [ "${#lane_of[@]}" -gt 0 ]; do
  wait -n -p ended "${!lane_of[@]}"
  lane=${lane_of[$ended]}
  unset "lane_of[$ended]"
  echo "===== lane $lane ====="
  cat "$logs/$lane.log"
done

failed=()
echo "===== lanes ====="
for lane in "$@"; do
  read -r rc secs <"$logs/$lane.status" 2>/dev/null || { rc=255; secs=?; }
  if [ "$rc" = 0 ]; then
    echo "lane $lane: passed in $secs s"
  else
    echo "lane $lane: FAILED (exit $rc) after $secs s; log: $logs/$lane.log"
    failed+=("$lane")
  fi
done
for lane in "${failed[@]}"; do
  echo "----- what failed in lane $lane -----"
  # without colours and molecule's frame, the lines that name a failure: pytest's, Ansible's, a Python error's
  sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^ *│ *//' "$logs/$lane.log" |
    grep -aE '^(FAILED|ERROR) |^molecule: .* FAILED|^E +[A-Za-z]*(Error|Exception)|failed=[1-9]|^fatal:|^CRITICAL|^ERROR|(^|[[:space:]])[0-9]+ (failed|errors?)\b|[A-Z][A-Za-z]+(Error|Exception): ' |
    cut -c1-300 | tail -n 25
done
[ "${#failed[@]}" -eq 0 ]
