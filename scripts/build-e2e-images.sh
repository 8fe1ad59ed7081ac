#!/usr/bin/env bash
# Builds the images the upstream e2e tests run, offline, under their upstream names.
#
#   scripts/build-e2e-images.sh OUT_DIR E2E_BIN_DIR
#
# E2E_BIN_DIR is scripts/build-e2e.sh's output (agnhost, nnp, pause); the shell tools are
# Debian's busybox-static, and /bin/sh and /bin/bash are Debian's bash-static (busybox's ash
# would drop environment variables whose names are not shell identifiers, which upstream's
# busybox image keeps and four env tests print). Writes OUT_DIR/<file>.oci.tar for (names as `e2e.test
# --list-images` prints them for the test bed's release):
#
#   registry.k8s.io/e2e-test-images/agnhost:2.56        /agnhost and its agnhost-2 link,
#       porter's localhost.crt/.key, /uploads, user-defined-in-image (uid 1000) in
#       group-defined-in-image (gid 50000); Entrypoint ["/agnhost"], Cmd ["pause"]. Upstream
#       bases it on Alpine with curl, bind-tools, netcat, iproute2, iperf and bash; here the
#       shell tools are busybox applets (nc, wget, ip, nslookup, ...), curl is a script over busybox wget for the `curl URL` the tests run, and there
#       is no dig or iperf.
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-1 and :1.36.1-1   busybox applets, Cmd ["sh"]
#   registry.k8s.io/e2e-test-images/nonroot:1.4         the busybox image with User 1234
#   registry.k8s.io/e2e-test-images/nonewprivs:1.3      busybox with the setuid-root
#                                                       /usr/local/bin/nnp; Cmd ["nnp"]
#   registry.k8s.io/pause:3.10.1                        /pause (exits 0 on TERM, reaps)
#
# Import them with `ctr -n k8s.io images import --snapshotter native OUT_DIR/*.oci.tar`
# (scripts/conformance.sh does). The output is reproducible.
set -euo pipefail

out="${1:?usage: build-e2e-images.sh OUT_DIR E2E_BIN_DIR}"
bin="${2:?usage: build-e2e-images.sh OUT_DIR E2E_BIN_DIR}"
busybox="${BUSYBOX:-/bin/busybox}"
bash_static="${BASH_STATIC:-/bin/bash-static}"
die() { echo "build-e2e-images.sh: $*" >&2; exit 1; }
[ -x "$busybox" ] || die "$busybox missing (apt-get install busybox-static)"
[ -x "$bash_static" ] || die "$bash_static missing (apt-get install bash-static)"
for b in agnhost nnp pause; do
  [ -x "$bin/$b" ] || die "$bin/$b missing (scripts/build-e2e.sh builds it)"
done
k8s_src="${K8S_SRC:-}"
if [ -z "$k8s_src" ]; then
  k8s_src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../testbed/e2e" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)" ||
    die "cannot find the k8s.io/kubernetes sources (go list -m in testbed/e2e)"
fi
[ -f "$k8s_src/test/images/agnhost/porter/localhost.crt" ] || die "$k8s_src has no agnhost sources"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/oci-image.sh
. "$(dirname "${BASH_SOURCE[0]}")/oci-image.sh"

# busybox_root DIR: busybox and a link per applet in /bin, /tmp, passwd and group.
busybox_root() {
  local root="$1" applet
  mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/root"
  chmod 1777 "$root/tmp"
  cp "$busybox" "$root/bin/busybox"
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  # sh is bash: Debian's busybox ash drops environment variables whose names are not shell
  # identifiers (data-1), which upstream's busybox keeps and the env tests print
  cp "$bash_static" "$root/bin/bash"
  ln -sf bash "$root/bin/sh"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

path='"PATH=/usr/local/bin:/usr/bin:/bin"'

root="$work/busybox"
busybox_root "$root"
for tag in 1.37.0-1 1.36.1-1; do
  image "registry.k8s.io/e2e-test-images/busybox:$tag" "$root" \
    "{\"Env\":[$path],\"Cmd\":[\"sh\"],\"WorkingDir\":\"/\"}" "$out/busybox-$tag.oci.tar"
done
image registry.k8s.io/e2e-test-images/nonroot:1.4 "$root" \
  "{\"Env\":[$path],\"Cmd\":[\"sh\"],\"User\":\"1234\",\"WorkingDir\":\"/\"}" "$out/nonroot-1.4.oci.tar"

root="$work/nonewprivs"
busybox_root "$root"
mkdir -p "$root/usr/local/bin"
cp "$bin/nnp" "$root/usr/local/bin/nnp"
chmod 4755 "$root/usr/local/bin/nnp"
image registry.k8s.io/e2e-test-images/nonewprivs:1.3 "$root" \
  "{\"Env\":[$path],\"Cmd\":[\"nnp\"],\"WorkingDir\":\"/\"}" "$out/nonewprivs-1.3.oci.tar"

root="$work/agnhost"
busybox_root "$root"
# the tests call `curl [-s] [-g] [-q] URL` (hooks, probes); busybox has wget
mkdir -p "$root/usr/bin"
cat >"$root/usr/bin/curl" <<'SH'
#!/bin/sh
# curl as the e2e tests call it, through busybox wget: options are ignored, the last
# argument is the URL; the body goes to stdout, a failure is exit 22 as curl -f's.
for url; do :; done
wget -q -O - "$url" || exit 22
SH
chmod 755 "$root/usr/bin/curl"
cp "$bin/agnhost" "$root/agnhost"
ln -sf agnhost "$root/agnhost-2"
mkdir -p "$root/uploads"
cp "$k8s_src/test/images/agnhost/porter/localhost.crt" "$k8s_src/test/images/agnhost/porter/localhost.key" "$root/"
chmod 644 "$root/localhost.crt" "$root/localhost.key"
printf 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n' >>"$root/etc/passwd"
printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$root/etc/group"
mkdir -p "$root/home/user-defined-in-image"
version="$(cat "$k8s_src/test/images/agnhost/VERSION")"
image "registry.k8s.io/e2e-test-images/agnhost:$version" "$root" \
  "{\"Env\":[$path],\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"],\"WorkingDir\":\"/\"}" \
  "$out/agnhost-$version.oci.tar"

root="$work/pause"
mkdir -p "$root/proc" "$root/sys" "$root/dev"
cp "$bin/pause" "$root/pause"
image registry.k8s.io/pause:3.10.1 "$root" \
  '{"Entrypoint":["/pause"],"WorkingDir":"/"}' "$out/pause-3.10.1.oci.tar"
