#!/usr/bin/env bash
# Before a release: is `make test` green N times in a row on a fresh checkout?
#
#   scripts/test_repeatedly.sh [-n N] [--explore] [--fast] [--out DIR] [REV]
#
# Clones this repository at REV (default HEAD: commit first) into a new folder, sets it up from
# nothing as a newcomer would (`make test` runs scripts/setup.sh test: its own .venv, the
# kernels built), then runs `make test` N times (default 5), each from the same fresh clone.
# Every run's log and time go to DIR (default a new folder in /tmp), with a summary at the end;
# the exit status is 0 only if every run passed.
#
#   --explore   hypothesis draws new examples in every run (NNTILE_LAB_HYPOTHESIS=explore;
#               a failure prints the seed that replays it). Without it each run draws the same
#               examples, as `make test` does everywhere: what varies is the machine (threads,
#               timing, load), which is what a newcomer meets.
#   --fast      `make test-fast` (no slow tests) instead of `make test`
#
# A failure found here is a bug to fix (in the code or in the test), never a run to retry:
# the script reruns nothing, it reports every failing test of every run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

runs=5 explore=0 target=test out="" rev=HEAD
while (($#)); do
    case "$1" in
        -n) runs=$2; shift 2 ;;
        --explore) explore=1; shift ;;
        --fast) target=test-fast; shift ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        -*) echo "test_repeatedly: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) rev=$1; shift ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "test_repeatedly: -n $runs: give a count ≥ 1" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}" 2>/dev/null) \
    || { echo "test_repeatedly: $rev is not a commit of $repo" >&2; exit 2; }
if [ "$rev" = HEAD ] && [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    echo "test_repeatedly: uncommitted changes are not tested (the clone is of $commit)" >&2
fi
out=${out:-$(mktemp -d /tmp/nntile_lab_release.XXXXXX)}
mkdir -p "$out"
clone="$out/checkout"

echo "test_repeatedly: $runs × make $target of $commit in $clone (logs in $out)"
git clone -q --no-hardlinks "$repo" "$clone"
git -C "$clone" checkout -q --detach "$commit"
env=(NNTILE_LAB_CACHE="$out/cache")   # no cache of the user's: a newcomer has none
[ "$explore" = 1 ] && env+=(NNTILE_LAB_HYPOTHESIS=explore)

passed=0
summary="$out/summary.txt"
: > "$summary"
for k in $(seq 1 "$runs"); do
    log="$out/run-$k.log"
    start=$(date +%s)
    # a fresh STARPU_HOME per run (tests/conftest.py makes one per session anyway)
    if (cd "$clone" && env "${env[@]}" make "$target") > "$log" 2>&1; then
        status=passed; passed=$((passed + 1))
    else
        status=FAILED
    fi
    secs=$(($(date +%s) - start))
    line="run $k: $status in ${secs} s ($(grep -Eo '[0-9]+ (passed|failed)[^=]*' "$log" | tail -1))"
    echo "$line" | tee -a "$summary"
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' | tee -a "$summary" || true
done
echo "test_repeatedly: $passed of $runs runs passed ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)); $summary" | tee -a "$summary"
[ "$passed" = "$runs" ]
