#!/usr/bin/env bash
# Runs every test binary given on the command line from the repository root,
# VX_TEST_JOBS of them at a time (default: the number of CPUs), the slowest
# first, and prints one line per test as it ends and a summary line
# "N passed, N failed". Most tests use one thread: on two CPUs the suite
# took 1.6x as long one test at a time.
set -u
jobs=${VX_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT

# The long ones start first so that the short ones fill the gaps.
slow="test_kernels test_models test_attention test_e2e test_amx test_engine"
ordered=()
for s in $slow; do
  for t in "$@"; do [ "$(basename "$t")" = "$s" ] && ordered+=("$t"); done
done
for t in "$@"; do
  case " $slow " in *" $(basename "$t") "*) ;; *) ordered+=("$t") ;; esac
done

run_one() {
  local t=$1 name status start secs
  name=$(basename "$t")
  start=$(date +%s.%N)
  if "$t" > "${t}.log" 2>&1; then status=PASS; else status=FAIL; fi
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  {
    printf '%-4s %-28s %6ss  %s\n' "$status" "$name" "$secs" "$(tail -n 1 "${t}.log")"
    if [ "$status" = FAIL ]; then sed 's/^/    | /' "${t}.log" | tail -n 40; fi
  } > "$res/$name.out"
  echo "$status" > "$res/$name.status"
  cat "$res/$name.out"
}

running=0
for t in "${ordered[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait

pass=0; fail=0; failed=()
for t in "$@"; do
  name=$(basename "$t")
  if [ "$(cat "$res/$name.status" 2>/dev/null)" = PASS ]; then
    pass=$((pass+1))
  else
    fail=$((fail+1)); failed+=("$name")
  fi
done
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
