#!/usr/bin/env bash
# Run every fuzz target for a fixed time (FUZZ_SECONDS each, default 60), starting from the
# checked-in seed corpus. Installs cargo-fuzz if missing. Exits non-zero on the first crash.
set -euo pipefail
cd "$(dirname "$0")"
secs="${FUZZ_SECONDS:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=$(cargo fuzz list)
cargo fuzz build -O
for t in $targets; do
  echo "--- fuzz $t for ${secs}s"
  mkdir -p "corpus/$t"
  seeds=()
  [ -d "seeds/$t" ] && seeds=("seeds/$t")
  log="$(mktemp)"
  if ! cargo fuzz run -O "$t" "corpus/$t" "${seeds[@]}" -- -max_total_time="$secs" \
      -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"; echo "fuzz target $t FAILED (artifact under fuzz/artifacts/$t)"; exit 1
  fi
  grep -E 'stat::number_of_executed_units|DONE' "$log" || true
  rm -f "$log"
done
