# shellcheck shell=bash
# Sourced by scripts/cluster.sh: the optional metrics-server component (`cluster.sh up DIR
# --with-metrics-server`), kept apart so the rest of cluster.sh merges easily.
#
# metrics-server (scripts/build-metrics-server.sh, pinned in testbed/metrics-server/go.mod)
# runs on the host as the cluster's `v1beta1.metrics.k8s.io` APIService, so that `kubectl
# top` works: it listens on the host's advertised address (an Endpoints address may not be
# loopback) with a serving certificate of the cluster CA for
# metrics-server.kube-system.svc; the apiserver (started with --enable-aggregator-routing,
# there is no kube-proxy) reaches it through a selector-less Service + Endpoints in
# kube-system. It authenticates to the apiserver as `system:metrics-server` (client
# certificate) with upstream's RBAC (ClusterRole system:metrics-server, auth-delegator,
# extension-apiserver-authentication-reader), and reads the node's resource metrics from its
# authenticated kubelet API as a real cluster's does: the port the Node reports
# (--kubelet-use-node-status-port) on its InternalIP, the node's serving certificate checked
# against the cluster CA, its own client certificate authorized for nodes/metrics.
# Scrapes every 15 s.
# Uses from cluster.sh: dir, bin, advertise_ip, say, fail, start, wait_for,
# free_port, cert, kubeconfig, kubectl, pki.

metrics_server_apiserver_args=(--enable-aggregator-routing=true)

metrics_server_available() {
  [ "$(kubectl get apiservice v1beta1.metrics.k8s.io \
    -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}')" = True ]
}

start_metrics_server() {
  local ms_bin ms_port p="$dir/pki"
  ms_bin="$("$repo/scripts/build-metrics-server.sh" | tail -n 1)" ||
    die "building metrics-server failed (see above)"
  free_port ms_port
  cert metrics-server "/CN=system:metrics-server" clientAuth
  cert metrics-server-serving "/CN=metrics-server" serverAuth \
    "IP:$advertise_ip,DNS:metrics-server,DNS:metrics-server.kube-system,DNS:metrics-server.kube-system.svc"
  kubeconfig "$dir/metrics-server.kubeconfig" system:metrics-server metrics-server
  echo "METRICS_SERVER=https://$advertise_ip:$ms_port" >>"$dir/cluster.env"
  kubectl apply -f - >>"$dir/logs/metrics-server.log" 2>&1 <<EOF || fail kube-apiserver "cannot create metrics-server's RBAC, Service and APIService"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:metrics-server"}
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:metrics-server"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:metrics-server"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "metrics-server:system:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "metrics-server-auth-reader", namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server"}]
---
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec:
  ports: [{name: https, port: 443, protocol: TCP, targetPort: $ms_port}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: metrics-server, namespace: kube-system}
subsets:
- addresses: [{ip: "$advertise_ip"}]
  ports: [{name: https, port: $ms_port, protocol: TCP}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: metrics-server, namespace: kube-system, port: 443}
  caBundle: $(base64 -w0 <"$p/ca.crt")
EOF
  start metrics-server "$ms_bin" \
    --kubeconfig "$dir/metrics-server.kubeconfig" \
    --authentication-kubeconfig "$dir/metrics-server.kubeconfig" \
    --authorization-kubeconfig "$dir/metrics-server.kubeconfig" \
    --bind-address "$advertise_ip" --secure-port "$ms_port" \
    --tls-cert-file "$p/metrics-server-serving.crt" \
    --tls-private-key-file "$p/metrics-server-serving.key" \
    --requestheader-client-ca-file "$p/front-proxy-ca.crt" \
    --kubelet-use-node-status-port --kubelet-certificate-authority "$p/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --metric-resolution 15s --kubelet-request-timeout 5s
  wait_for metrics-server "serving v1beta1.metrics.k8s.io (APIService Available)" metrics_server_available
}
