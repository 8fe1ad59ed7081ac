#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, with ledgerlet as its node (and, with
# --kubelet-node, the real kubelet of the same release as a second node beside it).
#
#   scripts/cluster.sh up DIR [--runtime embedded|containerd] [--no-node] [--node-name NAME]
#                             [--node-on-loopback] [--node-api-port PORT] [--node-arg FLAG]...
#                             [--with-metrics-server] [--kubelet-node NAME [--kubelet-api-port PORT]]
#   scripts/cluster.sh down DIR
#   scripts/cluster.sh status DIR
#   scripts/cluster.sh node-credentials DIR NAME
#   scripts/cluster.sh client-credentials DIR USER [GROUP]
#
# up     builds (or reuses) the test bed's binaries (scripts/build-testbed.sh: etcd and
#        Kubernetes at the versions pinned in testbed/go.mod), generates a CA and every
#        certificate into DIR, and starts, each on free loopback ports and with TLS + client
#        certificates: etcd, kube-apiserver (Node,RBAC authorization, NodeRestriction on top
#        of the default admission plugins, service-account tokens, service range
#        10.96.0.0/16 as data only; it listens on 127.0.0.1 but advertises the host's first
#        IPv4 address, because the `kubernetes` Service's endpoints may not be loopback),
#        kube-controller-manager (the controllers in $controllers below; node IPAM: the node
#        gets spec.podCIDR from 10.244.0.0/16) and kube-scheduler; then, unless --no-node, ledgerlet
#        as the node (target/release/ledgerlet, built with `cargo build --release` when missing
#        or older than the sources; LEDGERLET_BIN overrides it) with the node's own
#        certificate (CN=system:node:NAME, O=system:nodes), --cluster-dns 10.96.0.10 and
#        --cluster-domain cluster.local, as a kubeadm node (no DNS server answers there).
#        It returns 0 once the node is Ready=True (with --no-node: once the apiserver's
#        /readyz is ok, the controller-manager and the scheduler are healthy and the
#        default ServiceAccount exists). A component that is not up within
#        ${LEDGERLET_CLUSTER_TIMEOUT:-120} s fails `up`, which names it, prints the last 30
#        lines of its log and stops everything it started (DIR and its logs stay).
#        `up` on a DIR that is up fails (it is not idempotent: run `down` first). `up` on a
#        DIR left by an earlier `down` (or a failed `up`) starts afresh: it deletes what the
#        earlier run left in it. DIR must otherwise be absent or empty.
#   --runtime embedded     (default) ledgerlet's embedded runtime: containers are host
#                          processes, `command` is required, no images (see README.md).
#   --runtime containerd   a private containerd 1.6 + runc (Debian packages containerd, runc,
#                          containernetworking-plugins, busybox-static; installed when
#                          missing) with its root, state, socket and CNI under
#                          DIR/containerd, the `native` snapshotter and
#                          the offline images of scripts/build-test-images.sh imported
#                          (ledgerlet.test/busybox:1, and ledgerlet.test/pause:1 as the
#                          sandbox image). Pods get a bridge network (bridge "ll<hash of
#                          DIR>", host-local IPAM on the node's podCIDR, portmap for hostPorts): containerd renders
#                          DIR/containerd/cni/template.json (its conf_template) once ledgerlet
#                          hands it the node's podCIDR with CRI UpdateRuntimeConfig. Two
#                          containerd clusters at once would both get 10.244.0.0/24: set
#                          LEDGERLET_CLUSTER_CIDR (e.g. 10.245.0.0/16) for the second.
#                          A second runc handler, `ledgerlet-test`, is there for
#                          RuntimeClass tests.
#                          ledgerlet runs with --stop-pods-on-exit always, so
#                          `down` removes the pods' sandboxes through CRI.
#   --no-node              the control plane only.
#   --node-name NAME       the node's name (default ledgerlet-0).
#   --node-on-loopback     the node reports 127.0.0.1 as its InternalIP and listens there
#                          only (--node-ip 127.0.0.1 --address 127.0.0.1): nothing off the
#                          host reaches it, but the apiserver, which refuses to proxy to
#                          loopback, cannot reach its kubelet API either (no kubectl logs,
#                          exec or get --raw /api/v1/nodes/NAME/proxy/...).
#                          Default: the node reports the host's address (the apiserver's
#                          advertised one) and its kubelet API (authenticated) listens on
#                          all addresses; its read-only port stays on loopback.
#                          (--node-on-host, the default, is accepted.)
#   --node-api-port PORT   the node's kubelet API port (default: a free one; the upstream
#                          e2e tests want the kubelet's 10250, which some of them assume).
#   --node-arg FLAG        one more argument for `ledgerlet run` (repeatable), e.g.
#                          --node-arg=--kube-reserved=cpu=100m,memory=100Mi.
#   --with-metrics-server  metrics-server as the v1beta1.metrics.k8s.io APIService, once the
#                          node is Ready (`kubectl top`; see scripts/cluster-metrics-server.sh).
#   --kubelet-node NAME    one more node, NAME: the real kubelet of the pinned release, on its
#                          own containerd (DIR/kubelet/; scripts/cluster-kubelet.sh says why
#                          and what it sets); with --no-node, the cluster's only node. `up`
#                          returns once it is Ready too. Needs root.
#   --kubelet-api-port PORT  its kubelet API port (default: a free one).
# down   stops every process `up` started (pid files, SIGTERM then SIGKILL; ledgerlet gets
#        90 s to stop its pods), containerd's containers still running (runc delete
#        --force: the node may have been killed), anything left in their sessions and
#        containerd's shims; unmounts what is mounted under DIR, deletes the network
#        namespaces of containerd's sandboxes and the bridge; then checks that nothing is
#        left (exit 1 if something is).
#        It keeps DIR (logs, certificates, etcd data). Safe to run twice, or on a DIR that was
#        never up.
# node-credentials issues one more node's client certificate and kubeconfig
#        (DIR/nodes/NAME.kubeconfig, printed) and its kubelet API serving certificate
#        (DIR/pki/node-NAME-serving.crt/.key: IPs 127.0.0.1 and the host's, DNS NAME).
# client-credentials issues a client certificate CN=USER, O=GROUP signed by the cluster CA
#        (DIR/pki/user-USER.crt/.key, both printed), e.g. for a node's kubelet API.
# status prints the pid and health of each component `up` started; exit 0 only if all of
#        them are up and healthy (the node Ready), 1 otherwise (e.g. after `down`).
#
# DIR layout (a stable interface for tests and people):
#   DIR/cluster.env           KEY=VALUE lines (sourceable): APISERVER, ETCD, NODE_NAME,
#                             NODE_HTTP, RUNTIME, TESTBED_BIN, KUBERNETES_VERSION, ports...
#   DIR/admin.kubeconfig      cluster admin (CN=admin, O=system:masters)
#   DIR/node.kubeconfig       the node's credentials (CN=system:node:NAME, O=system:nodes)
#   DIR/controller-manager.kubeconfig, DIR/scheduler.kubeconfig
#   DIR/node-name             the node's name (absent with --no-node)
#   DIR/runtime-endpoint      unix://DIR/containerd/containerd.sock (containerd only)
#   DIR/bin                   link to the test bed's bin directory (kubectl, etcd, kube-*)
#   DIR/pki/                  ca.crt ca.key, <name>.crt/.key per certificate (RSA 2048;
#                             node-serving: the node's kubelet API certificate, node-NAME and
#                             node-NAME-serving from node-credentials, user-USER from
#                             client-credentials),
#                             sa.key sa.pub, front-proxy-ca.crt/.key
#   DIR/etcd/                 etcd's data directory
#   DIR/node/                 ledgerlet's --root-dir (pod logs in DIR/node/pod-logs)
#   DIR/manifests/            ledgerlet's --pod-manifest-path (static pods; empty)
#   DIR/containerd/           config.toml, root, state, runc, containerd.sock, cni/, images/
#   DIR/kubelet/              with --kubelet-node: config.yaml, kubelet.kubeconfig, root/,
#                             pod-logs/, containerd/ (as DIR/containerd/); cluster.env gets
#                             KUBELET_NODE_NAME, KUBELET_API_PORT, KUBELET_RUNTIME_ENDPOINT...
#   DIR/logs/<component>.log  etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#                             ledgerlet, containerd, kubelet, kubelet-containerd, metrics-server (with --with-metrics-server,
#                             which also writes DIR/metrics-server.kubeconfig and
#                             METRICS_SERVER=https://ADDR:PORT in cluster.env)
#   DIR/logs/audit.log        kube-apiserver's audit log, one JSON audit.k8s.io/v1 Event a
#                             line (ResponseComplete stage only): the create, update, patch
#                             and delete requests of nodes (group system:nodes) on pods and
#                             pods/status at level Request (with requestObject: the patch or
#                             the DeleteOptions), their GETs of pods at level Metadata;
#                             nothing else. Rotated at 100 MB, 1 backup
#                             (DIR/logs/audit-<time>.log).
#   DIR/audit-policy.yaml     the audit policy of DIR/logs/audit.log
#   DIR/pids/<component>.pid  one pid per running process (each its own session leader)
#   DIR/components            the components `up` started, one a line
#
# Environment: LEDGERLET_TESTBED_CACHE (see build-testbed.sh), LEDGERLET_BIN (the agent
# binary), LEDGERLET_CLUSTER_TIMEOUT (seconds per component, 120), LEDGERLET_CLUSTER_CIDR
# (10.244.0.0/16).
# Needs: root for --runtime containerd; openssl, curl, ss, flock; Go for a cold build. The
# Debian packages of what is missing are installed when running as root
# (scripts/packages.sh).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
timeout_s="${LEDGERLET_CLUSTER_TIMEOUT:-120}"
cluster_cidr="${LEDGERLET_CLUSTER_CIDR:-10.244.0.0/16}"
service_cidr="10.96.0.0/16"
# the cluster DNS Service IP pods are pointed at (kubeadm's: the tenth of the service range)
cluster_dns="10.96.0.10"
service_ip="10.96.0.1"
# kube-controller-manager --controllers (names or aliases of kube-controller-manager v1.34)
controllers="serviceaccount,serviceaccount-token,namespace,garbagecollector,nodelifecycle"
controllers+=",taint-eviction-controller,nodeipam,replicaset,deployment,statefulset,daemonset"
controllers+=",job,cronjob,ttl-after-finished,podgc,disruption,endpoint,endpointslice"
controllers+=",endpointslicemirroring,root-ca-cert-publisher,resourcequota,csrsigning"
controllers+=",persistentvolume-binder,pvc-protection,pv-protection"
controllers+=",csrapproving,csrcleaner,clusterrole-aggregation,ttl"
# stop order for `down` (the node first: it stops its pods through the runtime)
container_ids=""
components=(metrics-server ledgerlet kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd
  kubelet-containerd)

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
say() { echo "cluster.sh: $*" >&2; }
die() { say "$*"; exit 1; }
# shellcheck source=scripts/packages.sh
. "$repo/scripts/packages.sh"

# ---------------------------------------------------------------------------------------
# processes

# alive PID: the process exists and is not a zombie
alive() {
  local pid="$1" state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# ours PID: a live process whose command line names DIR (guards against a reused pid)
ours() {
  alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir/"
}

pid_of() { cat "$dir/pids/$1.pid" 2>/dev/null || true; }

# start NAME CMD...: runs CMD in its own session, stdout+stderr to DIR/logs/NAME.log
start() {
  local name="$1"; shift
  say "starting $name"
  setsid "$@" </dev/null >>"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name.pid"
  echo "$name" >>"$dir/components"
}

log_tail() {
  local name="$1"
  echo "----- last 30 lines of $dir/logs/$name.log -----" >&2
  tail -n 30 "$dir/logs/$name.log" >&2 2>/dev/null || echo "(no log)" >&2
  echo "-----" >&2
}

# fail NAME MESSAGE: prints the component's log tail, stops everything, exits 1
fail() {
  local name="$1"; shift
  say "$name: $*"
  log_tail "$name"
  say "stopping what was started (DIR and its logs stay: $dir)"
  do_down >&2 || true
  exit 1
}

# wait_for NAME DESCRIPTION CHECK...: polls CHECK until it succeeds; fails `up` when NAME's
# process exits or after the timeout
wait_for() {
  local name="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout_s)) pid
  pid="$(pid_of "$name")"
  until "$@" >/dev/null 2>&1; do
    if [ -n "$pid" ] && ! alive "$pid"; then
      fail "$name" "exited before $what"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "$name" "not $what within $timeout_s s"
    fi
    sleep 0.5
  done
  say "$name: $what"
}

# free_port VAR: sets VAR to a TCP port nobody listens on (and not handed out earlier in
# this run)
taken_ports=" "
free_port() {
  local var="$1" p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 12000))
    case "$taken_ports" in *" $p "*) continue ;; esac
    if [ -z "$(ss -Htln "( sport = :$p )" 2>/dev/null)" ]; then
      taken_ports+="$p "
      printf -v "$var" '%s' "$p"
      return 0
    fi
  done
  die "no free port found"
}

# port_or_free VAR WANTED FLAG: sets VAR to WANTED (refused, naming FLAG, when it is in use),
# or to a free port when WANTED is empty
port_or_free() {
  local var="$1" wanted="$2" flag="$3"
  if [ -z "$wanted" ]; then
    free_port "$var"
    return
  fi
  [ -z "$(ss -Htln "( sport = :$wanted )" 2>/dev/null)" ] || die "$flag $wanted: the port is in use"
  printf -v "$var" '%s' "$wanted"
}

# ---------------------------------------------------------------------------------------
# certificates and kubeconfigs

pki() { echo "$dir/pki/$1"; }

# cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES [CA_NAME]]
cert() {
  local name="$1" subj="$2" eku="$3" sans="${4:-}" ca="${5:-ca}"
  local p="$dir/pki"
  openssl req -new -nodes -newkey rsa:2048 -keyout "$p/$name.key" -out "$p/$name.csr" \
    -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$p/$name.ext"
  openssl x509 -req -in "$p/$name.csr" -CA "$p/$ca.crt" -CAkey "$p/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$p/$name.ext" \
    -out "$p/$name.crt" 2>/dev/null
  rm -f "$p/$name.csr" "$p/$name.ext"
  chmod 600 "$p/$name.key"
}

gen_pki() {
  local p="$dir/pki" loopback="IP:127.0.0.1,DNS:localhost"
  mkdir -p "$p"
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$p/ca.key" -out "$p/ca.crt" \
    -days 3650 -subj "/CN=ledgerlet-testbed-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  chmod 600 "$p/ca.key"
  cert etcd-server "/CN=etcd" serverAuth,clientAuth "$loopback"
  cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
  cert apiserver "/CN=kube-apiserver" serverAuth \
    "$loopback,IP:$advertise_ip,IP:$service_ip,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert admin "/O=system:masters/CN=admin" clientAuth
  cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  cert controller-manager-serving "/CN=kube-controller-manager" serverAuth "$loopback"
  cert scheduler "/CN=system:kube-scheduler" clientAuth
  cert scheduler-serving "/CN=kube-scheduler" serverAuth "$loopback"
  # the front proxy's own CA (kubeadm's layout): the apiserver publishes it in
  # kube-system/extension-apiserver-authentication, which delegated authentication reads
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$p/front-proxy-ca.key" \
    -out "$p/front-proxy-ca.crt" -days 3650 -subj "/CN=ledgerlet-testbed-front-proxy-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
  chmod 600 "$p/front-proxy-ca.key"
  cert front-proxy-client "/CN=front-proxy-client" clientAuth "" front-proxy-ca
  if [ "$with_node" = 1 ]; then
    cert node "/O=system:nodes/CN=system:node:$node_name" clientAuth,serverAuth "$loopback"
    # the node's kubelet API serving certificate (the apiserver checks it against ca.crt)
    cert node-serving "/O=system:nodes/CN=system:node:$node_name" serverAuth \
      "IP:127.0.0.1,IP:$advertise_ip,DNS:$node_name,DNS:localhost"
  fi
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$p/sa.key" 2>/dev/null
  openssl pkey -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  chmod 600 "$p/sa.key"
}

# kubeconfig FILE USER CERT_NAME: credentials embedded, the apiserver on loopback
kubeconfig() {
  local file="$1" user="$2" name="$3"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ledgerlet-testbed
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority-data: $(base64 -w0 <"$dir/pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$dir/pki/$name.crt")
    client-key-data: $(base64 -w0 <"$dir/pki/$name.key")
contexts:
- name: $user@ledgerlet-testbed
  context: {cluster: ledgerlet-testbed, user: $user}
current-context: $user@ledgerlet-testbed
EOF
  chmod 600 "$file"
}

# ---------------------------------------------------------------------------------------
# health checks

tls_get() { # tls_get CERT_NAME URL: body of a GET with a client certificate
  curl -sf --max-time 5 --cacert "$(pki ca.crt)" --cert "$(pki "$1.crt")" --key "$(pki "$1.key")" "$2"
}
etcd_healthy() { tls_get apiserver-etcd-client "https://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; }
apiserver_ready() { [ "$(tls_get admin "https://127.0.0.1:$apiserver_port/readyz")" = ok ]; }
kcm_healthy() { [ "$(curl -sf --max-time 5 --cacert "$(pki ca.crt)" "https://127.0.0.1:$kcm_port/healthz")" = ok ]; }
scheduler_healthy() { [ "$(curl -sf --max-time 5 --cacert "$(pki ca.crt)" "https://127.0.0.1:$scheduler_port/healthz")" = ok ]; }
kubectl() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout=5s "$@"; }
default_sa_exists() { kubectl -n default get serviceaccount default; }
# the node checks take the node's name (default: ledgerlet's node)
node_pod_cidr() { kubectl get node "${1:-$node_name}" -o 'jsonpath={.spec.podCIDR}'; }
node_has_pod_cidr() { [ -n "$(node_pod_cidr "${1:-}")" ]; }
node_registered() { kubectl get node "${1:-$node_name}"; }
node_ready() {
  [ "$(kubectl get node "${1:-$node_name}" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
node_http_healthy() { curl -sf --max-time 5 "http://127.0.0.1:$node_port/healthz" >/dev/null; }
# containerd_up [CDIR]: the containerd under CDIR (default DIR/containerd) answers
containerd_up() { local c="${1:-$dir/containerd}"; [ -S "$c/containerd.sock" ] && ctr_at "$c" version; }
ctr_at() { local c="$1"; shift; ctr --address "$c/containerd.sock" -n k8s.io "$@"; }
ctr_() { ctr_at "$dir/containerd" "$@"; }

# ---------------------------------------------------------------------------------------
# ledgerlet and containerd

ledgerlet_binary() {
  if [ -n "${LEDGERLET_BIN:-}" ]; then
    [ -x "$LEDGERLET_BIN" ] || die "LEDGERLET_BIN=$LEDGERLET_BIN is not an executable"
    echo "$LEDGERLET_BIN"
    return
  fi
  local b="$repo/target/release/ledgerlet"
  if [ ! -x "$b" ] || [ -n "$(cd "$repo" && find src proto build.rs Cargo.toml Cargo.lock \
        -newer "$b" -print -quit 2>/dev/null)" ]; then
    say "building ledgerlet (cargo build --release)"
    (cd "$repo" && cargo build --release --bin ledgerlet >&2) ||
      die "ledgerlet: cargo build --release failed"
  fi
  echo "$b"
}

# bridge_name CDIR: the pod bridge of the containerd under CDIR (unique per directory)
bridge_name() {
  local key="$dir"
  [ "$1" = "$dir/containerd" ] || key="$1"
  echo "ll$(printf '%s' "$key" | sha256sum | cut -c1-8)"
}

# start_containerd [COMPONENT CDIR]: a private containerd (component COMPONENT, default
# `containerd`) with everything under CDIR (default DIR/containerd)
start_containerd() {
  local name="${1:-containerd}" c="${2:-$dir/containerd}"
  need_packages "a node on containerd" "${CONTAINERD_WANTS[@]}" || die "containerd: see above"
  [ "$(id -u)" = 0 ] || die "containerd: --runtime containerd needs root"
  mkdir -p "$c/cni/conf" "$c/cni/ipam"
  bash "$repo/scripts/build-test-images.sh" "$c/images" ||
    die "containerd: scripts/build-test-images.sh failed"
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "ledgerlet.test/pause:1"
  # root here may lack CAP_SYS_RESOURCE: runc then cannot lower oom_score_adj
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$c/runc"
    # a second handler, for RuntimeClass tests (a RuntimeClass with handler ledgerlet-test)
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.ledgerlet-test]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.ledgerlet-test.options]
        Root = "$c/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$c/cni/conf"
    conf_template = "$c/cni/template.json"
    max_conf_num = 1
EOF
  bridge_name "$c" >"$c/bridge"
  write_cni_template "$c"
  start "$name" containerd --config "$c/config.toml"
  wait_for "$name" "serving on $c/containerd.sock" containerd_up "$c"
  local img
  for img in busybox pause; do
    ctr_at "$c" images import --snapshotter native "$c/images/$img.oci.tar" >>"$dir/logs/$name.log" 2>&1 ||
      fail "$name" "ctr images import $c/images/$img.oci.tar failed"
  done
}

# the pod network's template: containerd renders it into cni/conf/10-containerd-net.conflist
# when the node hands it the podCIDR (CRI UpdateRuntimeConfig, as the kubelet does)
write_cni_template() {
  local c="$1"
  cat >"$c/cni/template.json" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "ledgerlet-testbed",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$(cat "$c/bridge")",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$c/cni/ipam",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

pod_network_written() { [ -s "${1:-$dir/containerd}/cni/conf/10-containerd-net.conflist" ]; }

# ---------------------------------------------------------------------------------------
# up

do_up() {
  if [ -d "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    [ -f "$dir/.ledgerlet-cluster" ] ||
      die "$dir exists, is not empty and was not made by cluster.sh: refusing to use it"
    local c running=""
    for c in "${components[@]}"; do
      if ours "$(pid_of "$c")"; then running+=" $c($(pid_of "$c"))"; fi
    done
    [ -z "$running" ] || die "$dir is already up (running:$running): run 'scripts/cluster.sh down $dir' first"
    do_down >/dev/null 2>&1 || true   # a failed or interrupted run may have left a mount
    say "starting afresh in $dir (deleting what an earlier run left there)"
    find "$dir" -mindepth 1 -delete 2>/dev/null || rm -rf "${dir:?}"/* "$dir"/.[!.]*
  fi
  mkdir -p "$dir"/{logs,pids,etcd,manifests}
  chmod 700 "$dir/etcd"
  touch "$dir/.ledgerlet-cluster"
  need_packages "scripts/cluster.sh" "${CLUSTER_WANTS[@]}" || die "see above"

  bin="$("$repo/scripts/build-testbed.sh" | tail -n 1)" || die "building the test bed failed (see above)"
  [ -x "$bin/kube-apiserver" ] || die "build-testbed.sh printed no bin directory"
  ln -sfn "$bin" "$dir/bin"
  local k8s_version
  k8s_version="$(head -n 1 "$bin/../versions" 2>/dev/null | cut -d' ' -f2)"
  local ledgerlet=""
  [ "$with_node" = 0 ] || ledgerlet="$(ledgerlet_binary)"

  # The apiserver listens on loopback only, but the endpoints of the `kubernetes` Service
  # may not be a loopback address: it advertises the host's address (data, no traffic).
  advertise_ip="$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1)"
  advertise_ip="${advertise_ip:-$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.' || true)}"
  [ -n "$advertise_ip" ] || die "kube-apiserver: no non-loopback IPv4 address to advertise for the kubernetes Service"
  local etcd_peer_port
  free_port etcd_port; free_port etcd_peer_port; free_port apiserver_port
  free_port kcm_port; free_port scheduler_port; free_port node_port
  port_or_free node_api_port "$node_api_port_wanted" --node-api-port
  node_ip=127.0.0.1 node_address=127.0.0.1
  [ "$node_on_host" = 0 ] || { node_ip="$advertise_ip"; node_address=0.0.0.0; }
  gen_pki
  kubeconfig "$dir/admin.kubeconfig" admin admin
  kubeconfig "$dir/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
  kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler scheduler
  {
    echo "LEDGERLET_CLUSTER_DIR=$dir"
    echo "KUBERNETES_VERSION=$k8s_version"
    echo "TESTBED_BIN=$bin"
    echo "APISERVER=https://127.0.0.1:$apiserver_port"
    echo "ETCD=https://127.0.0.1:$etcd_port"
    echo "ETCD_PORT=$etcd_port"
    echo "ETCD_PEER_PORT=$etcd_peer_port"
    echo "APISERVER_PORT=$apiserver_port"
    echo "APISERVER_ADVERTISE_ADDRESS=$advertise_ip"
    echo "CONTROLLER_MANAGER_PORT=$kcm_port"
    echo "SCHEDULER_PORT=$scheduler_port"
    echo "CLUSTER_CIDR=$cluster_cidr"
    echo "SERVICE_CIDR=$service_cidr"
  } >"$dir/cluster.env"
  if [ "$with_node" = 1 ]; then
    kubeconfig "$dir/node.kubeconfig" "system:node:$node_name" node
    echo "$node_name" >"$dir/node-name"
    {
      echo "NODE_NAME=$node_name"
      echo "NODE_PORT=$node_port"
      echo "NODE_HTTP=http://127.0.0.1:$node_port"
      echo "NODE_IP=$node_ip"
      echo "NODE_API_PORT=$node_api_port"
      echo "NODE_API=https://127.0.0.1:$node_api_port"
      echo "RUNTIME=$runtime"
    } >>"$dir/cluster.env"
  fi

  local p="$dir/pki"
  start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
    --listen-client-urls "https://127.0.0.1:$etcd_port" \
    --advertise-client-urls "https://127.0.0.1:$etcd_port" \
    --listen-peer-urls "https://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "https://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "default=https://127.0.0.1:$etcd_peer_port" \
    --cert-file "$p/etcd-server.crt" --key-file "$p/etcd-server.key" \
    --client-cert-auth --trusted-ca-file "$p/ca.crt" \
    --peer-cert-file "$p/etcd-server.crt" --peer-key-file "$p/etcd-server.key" \
    --peer-client-cert-auth --peer-trusted-ca-file "$p/ca.crt"
  wait_for etcd "healthy on https://127.0.0.1:$etcd_port" etcd_healthy

  # the nodes' writes of pods and their statuses, as tests read them (DIR/logs/audit.log)
  cat >"$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  userGroups: [system:nodes]
  verbs: [create, update, patch, delete]
  resources:
  - group: ""
    resources: [pods, pods/status]
- level: Metadata
  userGroups: [system:nodes]
  verbs: [get]
  resources:
  - group: ""
    resources: [pods]
- level: None
EOF
  start kube-apiserver "$bin/kube-apiserver" \
    --bind-address 127.0.0.1 --advertise-address "$advertise_ip" --secure-port "$apiserver_port" \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --client-ca-file "$p/ca.crt" \
    --etcd-servers "https://127.0.0.1:$etcd_port" --etcd-cafile "$p/ca.crt" \
    --etcd-certfile "$p/apiserver-etcd-client.crt" --etcd-keyfile "$p/apiserver-etcd-client.key" \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --service-cluster-ip-range "$service_cidr" \
    --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$p/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$p/ca.crt" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --requestheader-client-ca-file "$p/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User \
    --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$p/front-proxy-client.crt" \
    --proxy-client-key-file "$p/front-proxy-client.key" \
    --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log" \
    --audit-log-format json --audit-log-maxsize 100 --audit-log-maxbackup 1 \
    "${apiserver_optional_args[@]}"
  wait_for kube-apiserver "ready (/readyz) on https://127.0.0.1:$apiserver_port" apiserver_ready

  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --tls-cert-file "$p/controller-manager-serving.crt" \
    --tls-private-key-file "$p/controller-manager-serving.key" \
    --client-ca-file "$p/ca.crt" \
    --leader-elect=false \
    --controllers "$controllers" \
    --use-service-account-credentials \
    --allocate-node-cidrs --cluster-cidr "$cluster_cidr" --service-cluster-ip-range "$service_cidr" \
    --root-ca-file "$p/ca.crt" \
    --service-account-private-key-file "$p/sa.key" \
    --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key"
  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$scheduler_port" \
    --tls-cert-file "$p/scheduler-serving.crt" --tls-private-key-file "$p/scheduler-serving.key" \
    --client-ca-file "$p/ca.crt" \
    --leader-elect=false
  wait_for kube-controller-manager "healthy on https://127.0.0.1:$kcm_port" kcm_healthy
  wait_for kube-scheduler "healthy on https://127.0.0.1:$scheduler_port" scheduler_healthy
  wait_for kube-controller-manager "has created the default ServiceAccount" default_sa_exists

  if [ "$with_node" = 1 ]; then
    local runtime_args=()
    if [ "$runtime" = containerd ]; then
      start_containerd
      echo "unix://$dir/containerd/containerd.sock" >"$dir/runtime-endpoint"
      runtime_args=(--container-runtime-endpoint "$(cat "$dir/runtime-endpoint")"
        --stop-pods-on-exit always)
    fi
    mkdir -p "$dir/node/pod-logs"
    start ledgerlet "$ledgerlet" run \
      --kubeconfig "$dir/node.kubeconfig" --node-name "$node_name" --node-ip "$node_ip" \
      --root-dir "$dir/node" --pod-logs-dir "$dir/node/pod-logs" \
      --pod-manifest-path "$dir/manifests" \
      --address "$node_address" --read-only-port "$node_port" --port "$node_api_port" \
      --tls-cert-file "$p/node-serving.crt" --tls-private-key-file "$p/node-serving.key" \
      --client-ca-file "$p/ca.crt" --authentication-token-webhook --authorization-mode Webhook \
      --cluster-dns "$cluster_dns" --cluster-domain cluster.local \
      "${runtime_args[@]}" "${node_args[@]}"
    wait_for ledgerlet "serving on http://127.0.0.1:$node_port" node_http_healthy
    wait_for ledgerlet "has registered Node $node_name" node_registered
    if [ "$runtime" = containerd ]; then
      wait_for kube-controller-manager "has given Node $node_name a podCIDR" node_has_pod_cidr
      wait_for containerd "has written the pod network for $(node_pod_cidr) (UpdateRuntimeConfig from the node)" pod_network_written
    fi
    wait_for ledgerlet "Node $node_name is Ready" node_ready
  fi
  [ -z "$kubelet_node_name" ] || start_kubelet_node
  [ "$with_metrics_server" = 0 ] || start_metrics_server
  say "up: $dir (kubectl --kubeconfig $dir/admin.kubeconfig ...; $bin/kubectl)"
}

# ---------------------------------------------------------------------------------------
# down

# stop NAME GRACE_SECONDS: SIGTERM, then SIGKILL after GRACE_SECONDS
stop() {
  local name="$1" grace="$2" pid
  pid="$(pid_of "$name")"
  [ -n "$pid" ] || return 0
  if ! ours "$pid"; then
    rm -f "$dir/pids/$name.pid"
    return 0
  fi
  say "stopping $name ($pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((grace * 10))); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    say "$name ($pid) did not stop within $grace s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$dir/pids/$name.pid"
}

# leftovers: live processes in the sessions of the given pids, in the cgroup of one of
# containerd's containers ($container_ids), and containerd's shims, runc and containerd
# serving DIR (their command line names DIR's socket or root)
leftovers() {
  local sessions=" $* " pid sid exe id
  local p
  for p in /proc/[0-9]*; do
    pid="${p#/proc/}"
    [ "$pid" != "$$" ] || continue
    alive "$pid" || continue
    for id in $container_ids; do
      if grep -qF -- "$id" "/proc/$pid/cgroup" 2>/dev/null; then echo "$pid"; continue 2; fi
    done
    sid="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f4)" || continue
    if [ -n "$sid" ] && [ "$sid" != 0 ] && [[ "$sessions" == *" $sid "* ]]; then
      echo "$pid"; continue
    fi
    exe="$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)" 2>/dev/null)" || continue
    case "$exe" in
      containerd|containerd-shim*|runc|etcd|kube-*|kubelet|ledgerlet)
        if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/"; then echo "$pid"; fi ;;
    esac
  done
}

# mounts under DIR, deepest first
mounts_under() {
  awk '{print $5}' /proc/self/mountinfo | while read -r m; do printf '%b\n' "${m//\\/\\0}"; done |
    awk -v d="$dir" '$0 == d || index($0, d "/") == 1 { print length($0) " " $0 }' |
    sort -rn | cut -d' ' -f2- | uniq
}

do_down() {
  [ -d "$dir" ] || { say "$dir does not exist: nothing to stop"; return 0; }
  local sessions="" c pid
  for c in "${components[@]}"; do
    pid="$(pid_of "$c")"
    # a dead leader's session may still have members (e.g. the embedded runtime's
    # containers when ledgerlet was killed); its id cannot be reused while they live
    if [ -n "$pid" ] && { ours "$pid" || ! alive "$pid"; }; then sessions+=" $pid"; fi
  done
  # the network namespaces of containerd's sandboxes, from their OCI specs (read before
  # anything stops: the bundles go when the tasks do)
  local netns="" cdirs=("$dir/containerd" "$dir/kubelet/containerd") cd
  for cd in "${cdirs[@]}"; do
    [ -d "$cd/state" ] || continue
    netns+=" $(find "$cd/state" -name config.json -path '*io.containerd.runtime.v2.task*' \
      -exec grep -ho '"/var/run/netns/[^"]*"\|"/run/netns/[^"]*"' {} + 2>/dev/null | tr -d '"' | sort -u)" || true
  done
  # containerd's containers (runc's state directories are named by container id)
  for cd in "${cdirs[@]}"; do
    container_ids+=" $(ls "$cd/runc/k8s.io" 2>/dev/null || true)"
  done
  stop metrics-server 20
  stop ledgerlet 90
  # the kubelet leaves its pods running when it stops: they go with runc delete below
  stop kubelet 20
  stop kube-scheduler 20
  stop kube-controller-manager 20
  stop kube-apiserver 30
  stop etcd 20
  stop containerd 20
  stop kubelet-containerd 20
  # containers the node did not stop (it was killed, or did not get to them): their
  # processes are not in any of the sessions above and outlive their shims
  for cd in "${cdirs[@]}"; do
    for c in $(ls "$cd/runc/k8s.io" 2>/dev/null || true); do
      say "removing container $c (runc delete --force)"
      runc --root "$cd/runc/k8s.io" delete --force "$c" >/dev/null 2>&1 || say "runc delete --force $c failed"
    done
  done
  # anything left: the components' sessions (e.g. embedded-runtime containers) and shims
  local left
  # shellcheck disable=SC2086 # a list of pids
  left="$(leftovers $sessions)"
  if [ -n "$left" ]; then
    say "killing what is left: ${left//$'\n'/ }"
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $left 2>/dev/null || true
    sleep 0.3
  fi
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done < <(mounts_under)
  for m in $netns; do
    umount -l "$m" 2>/dev/null || true
    rm -f "$m" 2>/dev/null || true
  done
  for cd in "${cdirs[@]}"; do
    if [ -f "$cd/bridge" ] && ip link show "$(cat "$cd/bridge")" >/dev/null 2>&1; then
      ip link del "$(cat "$cd/bridge")" || say "cannot delete bridge $(cat "$cd/bridge")"
    fi
  done
  remove_kubelet_cgroups
  # what is still there is a failure
  # shellcheck disable=SC2086 # a list of pids
  left="$(leftovers $sessions)"
  local mounts
  mounts="$(mounts_under)"
  if [ -n "$left" ] || [ -n "$mounts" ]; then
    say "down: left behind: processes [${left//$'\n'/ }] mounts [${mounts//$'\n'/ }]"
    return 1
  fi
  say "down: $dir (nothing left running)"
}

# ---------------------------------------------------------------------------------------
# status

# shellcheck disable=SC2153 # the upper-case variables come from cluster.env
do_status() {
  [ -f "$dir/cluster.env" ] || die "$dir is not a cluster directory (no cluster.env)"
  # shellcheck disable=SC1091 # written by up
  . "$dir/cluster.env"
  local bin="$TESTBED_BIN" ok=0 c pid state
  etcd_port="$ETCD_PORT"; apiserver_port="$APISERVER_PORT"; kcm_port="$CONTROLLER_MANAGER_PORT"
  scheduler_port="$SCHEDULER_PORT"; node_port="${NODE_PORT:-}"; node_name="${NODE_NAME:-}"
  [ -s "$dir/components" ] || { echo "no component was started"; return 1; }
  for c in "${components[@]}"; do
    grep -qx "$c" "$dir/components" || continue
    pid="$(pid_of "$c")"
    if [ -z "$pid" ] || ! ours "$pid"; then
      state="not running"; ok=1
    else
      case "$c" in
        etcd) etcd_healthy && state=healthy || state=unhealthy ;;
        kube-apiserver) apiserver_ready && state=ready || state="not ready" ;;
        kube-controller-manager) kcm_healthy && state=healthy || state=unhealthy ;;
        kube-scheduler) scheduler_healthy && state=healthy || state=unhealthy ;;
        metrics-server) metrics_server_available && state=serving || state="not serving" ;;
        containerd) containerd_up && state=serving || state="not serving" ;;
        kubelet-containerd) containerd_up "$dir/kubelet/containerd" && state=serving || state="not serving" ;;
        kubelet)
          if node_ready "$KUBELET_NODE_NAME"; then state="node $KUBELET_NODE_NAME Ready"
          else state="node $KUBELET_NODE_NAME not Ready"; fi ;;
        ledgerlet)
          if node_ready; then state="node $node_name Ready"; else state="node $node_name not Ready"; fi ;;
      esac
      case "$state" in healthy|ready|serving|*" Ready") ;; *) ok=1 ;; esac
    fi
    printf '%-24s %-8s %s\n' "$c" "${pid:--}" "$state"
  done
  return "$ok"
}

# client-credentials DIR USER [GROUP]: a client certificate signed by the cluster CA for
# USER (CN) in GROUP (O), e.g. to call a node's kubelet API; prints the .crt and .key paths
do_client_credentials() {
  [ -f "$dir/cluster.env" ] || die "$dir is not a cluster made by cluster.sh up"
  case "$extra_node" in
    ""|*[!a-z0-9.:-]*) die "client-credentials needs a user name (lowercase letters, digits, '.', ':', '-')" ;;
  esac
  case "$extra_group" in
    *[!a-z0-9.:-]*) die "client-credentials: the group may have lowercase letters, digits, '.', ':', '-'" ;;
  esac
  local name="user-${extra_node//:/_}" subj="/CN=$extra_node"
  [ -z "$extra_group" ] || subj="/O=$extra_group$subj"
  cert "$name" "$subj" clientAuth
  echo "$dir/pki/$name.crt"
  echo "$dir/pki/$name.key"
}

# node-credentials DIR NAME: a client certificate and kubeconfig for one more node
do_node_credentials() {
  [ -f "$dir/cluster.env" ] || die "$dir is not a cluster made by cluster.sh up"
  case "$extra_node" in
    ""|*[!a-z0-9.-]*|[.-]*|*[.-]) die "node-credentials needs a node name (lowercase DNS subdomain)" ;;
  esac
  apiserver_port="$(sed -n 's/^APISERVER_PORT=//p' "$dir/cluster.env")"
  mkdir -p "$dir/nodes"
  cert "node-$extra_node" "/O=system:nodes/CN=system:node:$extra_node" clientAuth,serverAuth \
    "IP:127.0.0.1,DNS:localhost"
  local host_ip
  host_ip="$(sed -n 's/^APISERVER_ADVERTISE_ADDRESS=//p' "$dir/cluster.env")"
  cert "node-$extra_node-serving" "/O=system:nodes/CN=system:node:$extra_node" serverAuth \
    "IP:127.0.0.1,${host_ip:+IP:$host_ip,}DNS:$extra_node,DNS:localhost"
  kubeconfig "$dir/nodes/$extra_node.kubeconfig" "system:node:$extra_node" "node-$extra_node"
  echo "$dir/nodes/$extra_node.kubeconfig"
}

# ---------------------------------------------------------------------------------------

[ $# -ge 2 ] || usage
cmd="$1"; dir_arg="$2"; shift 2
extra_node=""
extra_group=""
if [ "$cmd" = node-credentials ]; then extra_node="${1:-}"; shift $(( $# > 0 ? 1 : 0 )); fi
if [ "$cmd" = client-credentials ]; then
  extra_node="${1:-}"; extra_group="${2:-}"; shift $(( $# > 1 ? 2 : $# ))
fi
dir="$(realpath -m -- "$dir_arg")"
[ "$dir" != / ] || die "DIR may not be /"
runtime=embedded
with_node=1
node_on_host=1
node_api_port_wanted=""
node_name="ledgerlet-0"
node_args=()
with_metrics_server=0
apiserver_optional_args=()
# shellcheck source=scripts/cluster-metrics-server.sh
. "$repo/scripts/cluster-metrics-server.sh"
# shellcheck source=scripts/cluster-kubelet.sh
. "$repo/scripts/cluster-kubelet.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) runtime="${2:?--runtime needs embedded or containerd}"; shift 2 ;;
    --runtime=*) runtime="${1#--runtime=}"; shift ;;
    --no-node) with_node=0; shift ;;
    --node-on-host) node_on_host=1; shift ;;
    --node-on-loopback) node_on_host=0; shift ;;
    --node-api-port)
      [[ "${2:-}" =~ ^[1-9][0-9]{0,4}$ ]] && [ "$2" -le 65535 ] || die "--node-api-port wants a port number"
      node_api_port_wanted="$2"; shift 2 ;;
    --node-name) node_name="${2:?--node-name needs a name}"; shift 2 ;;
    --node-name=*) node_name="${1#--node-name=}"; shift ;;
    --node-arg) node_args+=("${2:?--node-arg needs a flag}"); shift 2 ;;
    --node-arg=*) node_args+=("${1#--node-arg=}"); shift ;;
    --kubelet-node)
      kubelet_node_name="${2:?--kubelet-node needs a node name}"; shift 2
      case "$kubelet_node_name" in
        *[!a-z0-9.-]*|[.-]*|*[.-]) die "--kubelet-node needs a node name (lowercase DNS subdomain)" ;;
      esac ;;
    --kubelet-api-port)
      [[ "${2:-}" =~ ^[1-9][0-9]{0,4}$ ]] && [ "$2" -le 65535 ] || die "--kubelet-api-port wants a port number"
      kubelet_api_port_wanted="$2"; shift 2 ;;
    --with-metrics-server)
      with_metrics_server=1
      apiserver_optional_args+=("${metrics_server_apiserver_args[@]}"); shift ;;
    *) say "unknown argument: $1"; usage ;;
  esac
done
case "$runtime" in embedded|containerd) ;; *) die "--runtime must be embedded or containerd, not $runtime" ;; esac

case "$cmd" in
  up)
    trap 'say "interrupted"; do_down >&2 || true; exit 130' INT TERM
    do_up ;;
  down) do_down ;;
  status) do_status ;;
  node-credentials) do_node_credentials ;;
  client-credentials) do_client_credentials ;;
  *) usage ;;
esac
