# shellcheck shell=bash
# Sourced by scripts/cluster.sh: the optional reference node (`cluster.sh up DIR
# --kubelet-node NAME`), the real kubelet of the pinned Kubernetes release, kept apart so the
# rest of cluster.sh merges easily.
#
# The kubelet gets its own containerd (component `kubelet-containerd`, the same package and
# the same configuration as ledgerlet's, everything under DIR/kubelet/containerd, its own
# pod bridge). It cannot share ledgerlet's: containerd's CRI plugin keeps every pod in one
# namespace (k8s.io), and the kubelet treats each sandbox and container it finds there that
# no pod of its own explains as an orphan, and kills it (HandlePodCleanups); ledgerlet's
# pods would die within a housekeeping period.
#
# Apart from that the kubelet runs on its defaults (a KubeletConfiguration with only what
# this machine and this cluster need, DIR/kubelet/config.yaml):
#   - cgroupDriver cgroupfs, as containerd's runc runs here, and failCgroupV1 false (the
#     host may mount cgroup v1);
#   - cgroupRoot /ll-kubelet-<hash of DIR>: its QoS cgroups (kubepods/...) stay out of
#     ledgerlet's /kubepods, whose pod cgroups the kubelet would otherwise destroy as
#     orphans (cleanupOrphanedPodCgroups); created here in every v1 hierarchy (and in the
#     unified one), removed by `down`;
#   - the cluster's authentication (client CA, webhook token review) and Webhook
#     authorization, its serving certificate (node-NAME-serving, signed by the cluster CA),
#     the kubelet API on the host's address at --kubelet-api-port (default: a free port),
#     healthz on loopback at a free port, no read-only port;
#   - clusterDNS 10.96.0.10 and clusterDomain cluster.local, as ledgerlet gets;
#   - rootDir DIR/kubelet/root, podLogsDir DIR/kubelet/pod-logs, volumePluginDir under
#     DIR/kubelet, staticPodPath DIR/kubelet/manifests.
# Uses from cluster.sh: dir, bin, repo, advertise_ip, cluster_dns, say, die, fail, start,
# wait_for, free_port, port_or_free, cert, kubeconfig, node_* checks, start_containerd.

kubelet_node_name=""
kubelet_api_port_wanted=""

kubelet_cgroup_root() { echo "/ll-kubelet-$(printf '%s' "$dir" | sha256sum | cut -c1-8)"; }

# the cgroup hierarchies of this host: every v1 controller mount and the unified one
cgroup_mounts() {
  awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo | sort -u
}

make_kubelet_cgroups() {
  local root m
  root="$(kubelet_cgroup_root)"
  while read -r m; do
    [ -n "$m" ] || continue
    mkdir -p "$m$root" || die "kubelet: cannot create the cgroup $m$root"
    # a new cpuset starts empty: give it its parent's CPUs and memory nodes
    if [ -f "$m$root/cpuset.cpus" ] && [ -z "$(cat "$m$root/cpuset.cpus")" ]; then
      cat "$m/cpuset.cpus" >"$m$root/cpuset.cpus"
      cat "$m/cpuset.mems" >"$m$root/cpuset.mems"
    fi
  done < <(cgroup_mounts)
}

# remove_kubelet_cgroups: the kubelet's cgroup tree, deepest first (processes left in it
# are killed first; `down` calls this after stopping everything)
remove_kubelet_cgroups() {
  [ -f "$dir/kubelet/config.yaml" ] || return 0
  local root m d
  root="$(kubelet_cgroup_root)"
  while read -r m; do
    [ -d "$m$root" ] || continue
    while read -r d; do
      if [ -f "$d/cgroup.procs" ] && [ -s "$d/cgroup.procs" ]; then
        # shellcheck disable=SC2046 # a list of pids
        kill -KILL $(cat "$d/cgroup.procs") 2>/dev/null || true
        sleep 0.2
      fi
      rmdir "$d" 2>/dev/null || say "cannot remove the cgroup $d"
    done < <(find "$m$root" -depth -type d)
  done < <(cgroup_mounts)
}

kubelet_healthy() { curl -sf --max-time 5 "http://127.0.0.1:$kubelet_healthz_port/healthz" >/dev/null; }

start_kubelet_node() {
  local k="$dir/kubelet" p="$dir/pki" name="$kubelet_node_name" api_port
  [ "$(id -u)" = 0 ] || die "kubelet: --kubelet-node needs root"
  [ -x "$bin/kubelet" ] || die "kubelet: $bin/kubelet is missing (scripts/build-testbed.sh builds it)"
  mkdir -p "$k"/{root,pod-logs,manifests,volume-plugins}
  port_or_free api_port "$kubelet_api_port_wanted" --kubelet-api-port
  free_port kubelet_healthz_port
  cert "kubelet-$name" "/O=system:nodes/CN=system:node:$name" clientAuth
  cert "kubelet-$name-serving" "/O=system:nodes/CN=system:node:$name" serverAuth \
    "IP:127.0.0.1,IP:$advertise_ip,DNS:$name,DNS:localhost"
  kubeconfig "$k/kubelet.kubeconfig" "system:node:$name" "kubelet-$name"
  {
    echo "KUBELET_NODE_NAME=$name"
    echo "KUBELET_API_PORT=$api_port"
    echo "KUBELET_HEALTHZ_PORT=$kubelet_healthz_port"
    echo "KUBELET_RUNTIME_ENDPOINT=unix://$k/containerd/containerd.sock"
    echo "KUBELET_ROOT_DIR=$k/root"
    echo "KUBELET_CGROUP_ROOT=$(kubelet_cgroup_root)"
  } >>"$dir/cluster.env"
  cat >"$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 0.0.0.0
port: $api_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $p/kubelet-$name-serving.crt
tlsPrivateKeyFile: $p/kubelet-$name-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $p/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: $(kubelet_cgroup_root)
failCgroupV1: false
clusterDNS: [$cluster_dns]
clusterDomain: cluster.local
containerRuntimeEndpoint: unix://$k/containerd/containerd.sock
podLogsDir: $k/pod-logs
staticPodPath: $k/manifests
volumePluginDir: $k/volume-plugins
EOF
  make_kubelet_cgroups
  start_containerd kubelet-containerd "$k/containerd"
  start kubelet "$bin/kubelet" --config "$k/config.yaml" --kubeconfig "$k/kubelet.kubeconfig" \
    --root-dir "$k/root" --hostname-override "$name" --node-ip "$advertise_ip" --v=2
  wait_for kubelet "healthy on http://127.0.0.1:$kubelet_healthz_port" kubelet_healthy
  wait_for kubelet "has registered Node $name" node_registered "$name"
  wait_for kube-controller-manager "has given Node $name a podCIDR" node_has_pod_cidr "$name"
  wait_for kubelet-containerd "has written the pod network for $(node_pod_cidr "$name") (UpdateRuntimeConfig from the kubelet)" \
    pod_network_written "$k/containerd"
  wait_for kubelet "Node $name is Ready" node_ready "$name"
}
