# Sourced by the short device-call scripts (gpu-quick.sh, gpu-passes.sh), on the GPU machine:
#   source "$(dirname "$0")/gpu-steps.sh" NAME OUTDIR [TAG]
# makes OUTDIR (absolute in $out), moves to the repository root, points at build-gpu/ ($build),
# starts OUTDIR/NAME.log ($log) with the GPU's name and clocks, gives the run a fresh kernel cache
# and the build's commit, sets $day (UTC date) and $tag (TESSEL_RESULT_TAG, else TAG), and
# defines `step NAME LIMIT_S COMMAND...`: runs the command under its limit, its output into the
# log, and sets $status to 1 when it fails.
gpu_steps_name=${1:?usage: source scripts/gpu-steps.sh NAME OUTDIR}
out=${2:?usage: scripts/$gpu_steps_name.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=build-gpu
log="$out/$gpu_steps_name.log"
: >"$log"
export TESSEL_NO_PROGRESS=1
TESSEL_CACHE_DIR=$(mktemp -d "/tmp/tessel-$gpu_steps_name-cache-XXXXXX")
export TESSEL_CACHE_DIR
export TESSEL_GIT_COMMIT=$( (cat "$build/git-commit.txt" 2>/dev/null || echo unknown) | tr -s ' \n\t' '-' | sed 's/-$//')
echo "$gpu_steps_name: $(date -u +%FT%TZ), commit $TESSEL_GIT_COMMIT" | tee -a "$log"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >>"$log" 2>&1
day=$(date -u +%F)
tag=${TESSEL_RESULT_TAG:-${3:-$gpu_steps_name}}
status=0
step() {  # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  echo "### $name: $*" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local code=$?
  [[ $code == 0 ]] || status=1
  echo "### $name: exit $code after $((SECONDS - start)) s" | tee -a "$log"
}
