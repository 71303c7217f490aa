#!/usr/bin/env bash
# The README's two commands as a new user meets them: a fresh clone of this checkout's HEAD, the
# system Python (PATH=/usr/bin:/bin: Debian's own python3, which refuses pip, PEP 668), no
# virtual environment active, and each command timed. Writes the transcript to OUT (default
# ./fresh-clone-<date>.log) and exits with the first failing command's status.
#
#   benchmarks/install/fresh_clone.sh [demo|test|both] [OUT]
#
# PYPI_ONLY=1 runs the commands with pip seeing PyPI alone (no pip configuration files, no
# PIP_FIND_LINKS: PyPI has no +cpu torch wheel), and TORCHUTIL_CPU_INDEX passes through, so a
# local stand-in for PyTorch's CPU index shows the fallback on a machine without internet.
set -euo pipefail
what=${1:-both}
out=$(realpath -m "${2:-fresh-clone-$(date +%Y%m%d-%H%M%S).log}")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/torchutil-fresh-XXXXXX)
git clone -q "$root" "$work/torchutil"
cd "$work/torchutil"
envs=(PATH=/usr/bin:/bin HOME="$HOME" LANG=C.UTF-8 TERM=dumb)
[ -n "${TORCHUTIL_CPU_INDEX:-}" ] && envs+=(TORCHUTIL_CPU_INDEX="$TORCHUTIL_CPU_INDEX")
if [ "${PYPI_ONLY:-0}" = 1 ]; then
  envs+=(PIP_CONFIG_FILE=/dev/null)
else
  # This machine's pip set-up as it is (its configuration files; PIP_FIND_LINKS names a local
  # wheel folder).
  for v in PIP_FIND_LINKS PIP_CERT PIP_DEFAULT_TIMEOUT; do [ -n "${!v:-}" ] && envs+=("$v=${!v}"); done
fi
{
  echo "# fresh clone of $(git -C "$root" rev-parse --short HEAD) in $work/torchutil, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB, $(. /etc/os-release; echo "$PRETTY_NAME"), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# environment: ${envs[*]}"
  echo "# python3 on that PATH: $(env -i "${envs[@]}" bash -c 'command -v python3; python3 --version' | tr '\n' ' ')"
} | tee "$out"
rc=0
for cmd in demo test; do
  [ "$what" = both ] || [ "$what" = "$cmd" ] || continue
  echo "\$ make $cmd" | tee -a "$out"
  start=$(date +%s)
  set +e
  env -i "${envs[@]}" make "$cmd" 2>&1 | tee -a "$out"
  status=${PIPESTATUS[0]}
  set -e
  echo "# make $cmd: exit $status after $(( $(date +%s) - start )) s (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out"
  [ "$status" -eq 0 ] || { rc=$status; break; }
done
echo "# transcript: $out; the clone stays in $work" | tee -a "$out"
exit "$rc"
