#!/usr/bin/env bash
# Builds the two OCI images the containerd tests use, from Debian's busybox-static, offline.
#
#   scripts/build-test-images.sh OUT_DIR
#
# writes
#   OUT_DIR/busybox.oci.tar  ledgerlet.test/busybox:1  workloads: /bin/busybox and a link per
#                            applet (sh, sleep, httpd, nc, cat, echo, kill, ...), /tmp (1777),
#                            /etc/passwd and /etc/group (root, nobody); Cmd ["sh"]
#   OUT_DIR/pause.oci.tar    ledgerlet.test/pause:1    the sandbox image: /bin/busybox only,
#                            Entrypoint ["/bin/busybox", "sleep", "infinity"]
#
# Each archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) with one
# uncompressed layer, a config and a manifest; index.json names the image with the
# `io.containerd.image.name` annotation, so
#
#   ctr -n k8s.io images import --snapshotter native OUT_DIR/busybox.oci.tar
#
# registers it under that name for the CRI plugin. Nothing is downloaded: the only input is
# /bin/busybox (package busybox-static). The output is reproducible (fixed mtimes, owners and
# order), so the image digests only change when busybox does.
set -euo pipefail

out="${1:?usage: build-test-images.sh OUT_DIR}"
busybox="${BUSYBOX:-/bin/busybox}"
[ -x "$busybox" ] || { echo "build-test-images.sh: $busybox missing (apt-get install busybox-static)" >&2; exit 1; }
file "$busybox" 2>/dev/null | grep -q 'dynamically linked' &&
  { echo "build-test-images.sh: $busybox is not static (install busybox-static)" >&2; exit 1; }
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck source=scripts/oci-image.sh
. "$(dirname "${BASH_SOURCE[0]}")/oci-image.sh"

# The workload image.
root="$work/busybox-root"
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/root" "$root/var/www"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
image ledgerlet.test/busybox:1 "$root" \
  '{"Env":["PATH=/bin"],"Cmd":["sh"],"WorkingDir":"/"}' "$out/busybox.oci.tar"

# The pause (sandbox) image.
root="$work/pause-root"
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev"
cp "$busybox" "$root/bin/busybox"
image ledgerlet.test/pause:1 "$root" \
  '{"Env":["PATH=/bin"],"Entrypoint":["/bin/busybox","sleep","infinity"],"WorkingDir":"/"}' "$out/pause.oci.tar"
