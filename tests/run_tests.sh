#!/usr/bin/env bash
# Runs every test binary given on the command line from the repository root
# and prints one summary line "N passed, N failed".
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
  name=$(basename "$t")
  start=$(date +%s.%N)
  if "$t" > "${t}.log" 2>&1; then
    pass=$((pass+1)); status=PASS
  else
    fail=$((fail+1)); status=FAIL; failed+=("$name")
  fi
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  printf '%-4s %-28s %6ss  %s\n' "$status" "$name" "$secs" "$(tail -n 1 "${t}.log")"
  if [ "$status" = FAIL ]; then sed 's/^/    | /' "${t}.log" | tail -n 40; fi
done
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
