# shellcheck shell=bash
# Sourced by the build-*-images.sh scripts: an OCI image layout archive from a root file
# system, offline and reproducible (fixed mtimes, owners and order).
#
#   image NAME ROOTFS_DIR CONFIG_JSON_FRAGMENT ARCHIVE
#
# writes ARCHIVE, an OCI image layout (oci-layout, index.json, blobs/sha256/...) with one
# uncompressed layer, a config and a manifest; index.json names the image NAME with the
# `io.containerd.image.name` annotation, so `ctr -n k8s.io images import --snapshotter
# native ARCHIVE` registers it under that name for the CRI plugin. The caller sets $work (a
# scratch directory).

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# blob FILE -> moves FILE into the layout's blob store, prints its digest hex.
blob() {
  local layout="$1" file="$2" d
  d="$(sha "$file")"
  mkdir -p "$layout/blobs/sha256"
  mv "$file" "$layout/blobs/sha256/$d"
  printf '%s' "$d"
}

# image NAME ROOTFS_DIR CONFIG_JSON_FRAGMENT ARCHIVE
image() {
  local name="$1" rootfs="$2" cfg="$3" archive="$4"
  local layout="$work/layout-$(basename "$archive")"
  rm -rf "$layout"; mkdir -p "$layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$rootfs" -cf "$work/layer.tar" .
  local layer layer_size
  layer_size="$(size "$work/layer.tar")"
  layer="$(blob "$layout" "$work/layer.tar")"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$cfg" "$layer" >"$work/config.json"
  local config config_size
  config_size="$(size "$work/config.json")"
  config="$(blob "$layout" "$work/config.json")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$config_size" "$layer" "$layer_size" >"$work/manifest.json"
  local manifest manifest_size
  manifest_size="$(size "$work/manifest.json")"
  manifest="$(blob "$layout" "$work/manifest.json")"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$name" >"$layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$archive.tmp" .
  mv "$archive.tmp" "$archive"
}

