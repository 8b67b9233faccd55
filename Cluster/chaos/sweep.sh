#!/usr/bin/env bash
# Runs `oscar chaos` once per seed, one run after another, and prints one
# line per seed and a summary. Use it to look for a seed that fails.
#
# usage: Cluster/chaos/sweep.sh SEEDS DURATION [extra oscar chaos args...]
#
#   SEEDS      1-20, 3,5,9, or a mix such as 1-5,9
#   DURATION   each run's --duration, for example 60s or 2m (at least 15s)
#   extra      passed on to every run, after --nodes 5, so they can change it:
#              for example --faults partition,kill or --nodes 7
#              (--seed, --duration and --report are set by this script)
#
# Each run is `oscar chaos --nodes 5 --duration DURATION --seed S
# --report DIR/seed-S [extra]` (DIR: OSCAR_SWEEP_DIR below), stopped after
# DURATION + 180 s. A run that
# fails a check, exits non-zero, crashes or times out counts as FAIL. Its
# report directory (report.txt, history.jsonl, timeline.svg, the node logs,
# and output.txt with what oscar printed) is kept; a passing seed's is
# deleted. Exit status: 0 when every seed passed, 1 otherwise, 2 for bad
# arguments, 130 when interrupted (Ctrl-C stops the current run's nodes too).
#
# Per seed:  seed 7    PASS  convergence 1.4 s        -
#            seed 8    FAIL  convergence 2.9 s        no split brain
# At the end: sweep: 20 seeds, 19 passed, 1 failed (seeds: 8), worst convergence 3.1 s (seed 12)
#
# Environment:
#   OSCAR_BIN        the oscar binary to run; when unset, `swift build -c
#                    release` runs first and .build/release/oscar is used
#   OSCAR_SWEEP_DIR  where reports go (default .oscar/sweep)
#   OSCAR_SWEEP_KEEP 1 keeps the reports of passing seeds too
#
# Paths are taken relative to the directory you run the script from; the
# runs themselves start in the repository root (where --scenario NAME looks).
set -euo pipefail

usage() {
  sed -n '5,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() {
  echo "sweep: $*" >&2
  exit 2
}

[ $# -ge 2 ] || usage
seed_spec=$1
duration=$2
shift 2
extra=("$@")

for arg in "${extra[@]}"; do
  case $arg in
    --seed | --seed=* | --duration | --duration=* | --report | --report=*)
      die "$arg is set by the sweep itself; give seeds and duration as SEEDS and DURATION" ;;
  esac
done

# SEEDS: comma-separated whole numbers and ranges, in the order given,
# each seed once.
seeds=()
declare -A seen=()
IFS=',' read -r -a parts <<<"$seed_spec"
[ ${#parts[@]} -gt 0 ] || die "no seeds in '$seed_spec'"
for part in "${parts[@]}"; do
  if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
    low=$((10#${BASH_REMATCH[1]}))
    high=$((10#${BASH_REMATCH[2]}))
    [ "$low" -le "$high" ] || die "seed range '$part' runs backwards"
  elif [[ $part =~ ^[0-9]+$ ]]; then
    low=$((10#$part))
    high=$low
  else
    die "SEEDS takes whole numbers and ranges such as 1-20, 3,5,9 or 1-5,9, not '$seed_spec'"
  fi
  for ((s = low; s <= high; s++)); do
    if [ -z "${seen[$s]:-}" ]; then
      seen[$s]=1
      seeds+=("$s")
    fi
  done
done

# DURATION in whole seconds (rounded up), for the timeout: 90, 90s, 1.5m, 500ms.
if ! duration_seconds=$(awk -v d="$duration" 'BEGIN {
  if (d ~ /^[0-9]+(\.[0-9]+)?ms$/) { v = substr(d, 1, length(d) - 2) / 1000 }
  else if (d ~ /^[0-9]+(\.[0-9]+)?us$/) { v = substr(d, 1, length(d) - 2) / 1000000 }
  else if (d ~ /^[0-9]+(\.[0-9]+)?s$/) { v = substr(d, 1, length(d) - 1) }
  else if (d ~ /^[0-9]+(\.[0-9]+)?m$/) { v = substr(d, 1, length(d) - 1) * 60 }
  else if (d ~ /^[0-9]+(\.[0-9]+)?$/) { v = d }
  else { exit 1 }
  printf "%d\n", (v == int(v)) ? v : int(v) + 1
}'); then
  die "DURATION takes a duration such as 60s or 2m, not '$duration'"
fi
limit=$((duration_seconds + 180))

# Paths from the caller's directory, before moving to the repository root.
sweep_dir=$(realpath -m "${OSCAR_SWEEP_DIR:-.oscar/sweep}")
if [ -n "${OSCAR_BIN:-}" ]; then
  if [[ $OSCAR_BIN == */* ]]; then oscar=$(realpath -m "$OSCAR_BIN"); else oscar=$(command -v "$OSCAR_BIN" || true); fi
  cd "$(dirname "$0")/../.."
else
  cd "$(dirname "$0")/../.."
  echo "sweep: swift build -c release" >&2
  swift build -c release >&2
  oscar=$PWD/.build/release/oscar
fi
[ -x "$oscar" ] || die "no oscar binary at $oscar"
mkdir -p "$sweep_dir"

trap 'printf "\nsweep: interrupted\n" >&2; exit 130' INT

echo "sweep: seeds $seed_spec, $duration each (at most ${limit} s a run), reports in $sweep_dir" >&2

passed=0
failed=()
worst=""      # the largest convergence time seen, in seconds
worst_seed=""
unconverged=()
interactive=0
[ -t 2 ] && interactive=1

for seed in "${seeds[@]}"; do
  dir=$sweep_dir/seed-$seed
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$interactive" = 1 ]; then printf 'seed %s  running ...' "$seed" >&2; fi
  # output.txt, not *.log: oscar chaos clears *.log files from its report directory.
  status=0
  timeout -k 15 "$limit" "$oscar" chaos --nodes 5 --duration "$duration" --seed "$seed" --report "$dir" \
    "${extra[@]}" >"$dir/output.txt" 2>&1 || status=$?
  if [ "$interactive" = 1 ]; then printf '\r\033[K' >&2; fi

  if [ "$status" = 64 ]; then
    # Bad arguments fail every seed the same way: stop at the first.
    cat "$dir/output.txt" >&2
    rm -rf "$dir"
    rmdir "$sweep_dir" 2>/dev/null || true
    die "oscar chaos rejected the arguments (exit 64)"
  fi

  report=$dir/report.txt
  verdict=""
  convergence="-"
  failing="-"
  if [ -f "$report" ]; then
    verdict=$(sed -n 's/^verdict  *\([A-Z]*\).*/\1/p' "$report")
    line=$(grep '^convergence ' "$report" || true)
    if [[ $line =~ at\ most\ ([0-9.]+)\ s ]]; then
      convergence="${BASH_REMATCH[1]} s"
      if [ -z "$worst" ] || awk -v a="${BASH_REMATCH[1]}" -v b="$worst" 'BEGIN { exit !(a > b) }'; then
        worst=${BASH_REMATCH[1]}
        worst_seed=$seed
      fi
    elif [[ $line == *"not reached"* ]]; then
      convergence="not reached"
      unconverged+=("$seed")
    fi
    checks=()
    while IFS= read -r check; do checks+=("$check"); done < <(sed -n 's/^  FAIL //p' "$report")
    if [ ${#checks[@]} -gt 0 ]; then
      failing=${checks[0]}
      [ ${#checks[@]} -gt 1 ] && failing="$failing (+$((${#checks[@]} - 1)) more)"
    fi
  fi

  if [ "$status" = 0 ] && [ "$verdict" = PASS ]; then
    result=PASS
    passed=$((passed + 1))
    [ "${OSCAR_SWEEP_KEEP:-0}" = 1 ] || rm -rf "$dir"
  else
    result=FAIL
    failed+=("$seed")
    if [ "$failing" = - ]; then
      # No failing check to name: say why the run itself failed.
      case $status in
        124 | 137) failing="timed out after ${limit} s" ;;
        0) failing="no verdict in report.txt" ;;
        *)
          if [ "$status" -gt 128 ]; then
            failing="crashed (signal $((status - 128)))"
          else
            failing="exited with status $status"
          fi
          [ -f "$report" ] || failing="$failing, no report"
          ;;
      esac
    fi
  fi
  printf 'seed %-4s %s  convergence %-12s %s\n' "$seed" "$result" "$convergence" "$failing"
done

rmdir "$sweep_dir" 2>/dev/null || true

noun=seeds
[ ${#seeds[@]} -ne 1 ] || noun=seed
summary="sweep: ${#seeds[@]} $noun, $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ] || summary="$summary (seeds: $(IFS=,; echo "${failed[*]}"))"
if [ -n "$worst" ]; then
  summary="$summary, worst convergence $worst s (seed $worst_seed)"
else
  summary="$summary, worst convergence -"
fi
[ ${#unconverged[@]} -eq 0 ] || summary="$summary, not converged: seeds ${unconverged[*]}"
if [ ${#failed[@]} -gt 0 ]; then
  kept=("${failed[@]/#/seed-}")
  echo "failing seeds' reports (report.txt, timeline.svg) kept in $sweep_dir: ${kept[*]}" >&2
fi
echo "$summary"
[ ${#failed[@]} -eq 0 ]
