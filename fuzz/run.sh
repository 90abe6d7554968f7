#!/usr/bin/env bash
# Runs one fuzz target for SECONDS of fuzzing, from its checked-in seeds
# (fuzz/seeds/<target>, read only) and the corpus earlier runs grew
# (fuzz/corpus/<target>, where new inputs go), with its dictionary when it
# has one. A crash stops it: the input is in fuzz/artifacts/<target>/.
#   fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
set -euo pipefail
target=$1 seconds=$2
shift 2
cd "$(dirname "$0")"
mkdir -p "corpus/$target"
flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1)
if [[ -f "dict/$target.dict" ]]; then
    flags+=(-dict="dict/$target.dict")
fi
echo "fuzz: $target for ${seconds}s" >&2
LD_LIBRARY_PATH="$PWD/../engine/lib" cargo +nightly fuzz run -s none "$target" \
    "corpus/$target" "seeds/$target" -- "${flags[@]}" "$@"
