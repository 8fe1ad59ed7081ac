# shellcheck shell=bash
# Sourced by the build-*.sh scripts: a cache entry built from the Go module proxy, complete or
# absent.
#
#   go_cache_build ENTRY WHAT COMPLETE BUILD
#
# ENTRY is the cache entry's directory (its parent is the cache root), WHAT names what is
# built (for messages), COMPLETE a command that succeeds when ENTRY holds everything, and
# BUILD a command that builds into the directory given as its one argument (which has a bin/
# already). When ENTRY is complete nothing runs (no Go needed). Otherwise, under a lock that
# concurrent runs wait on, BUILD fills a temporary directory next to ENTRY, which is then
# renamed into place. Old entries are not removed (delete the cache root to reclaim them).
# The caller defines die().

go_cache_build() {
  local entry="$1" what="$2" complete="$3" build="$4" root tmp
  "$complete" && return 0
  command -v go >/dev/null 2>&1 ||
    die "the Go toolchain is not installed (or not on PATH): it is needed to build $what"
  root="$(dirname "$entry")"
  mkdir -p "$root" || die "cannot create the cache directory $root"
  exec 9>"$root/.lock-$(basename "$entry")"
  flock 9
  # another run may have built it while this one waited
  "$complete" && return 0
  tmp="$(mktemp -d "$root/.tmp-$(basename "$entry")-XXXXXX")"
  # shellcheck disable=SC2064 # the path is fixed now
  trap "rm -rf '$tmp'" EXIT
  chmod 755 "$tmp"
  mkdir -p "$tmp/bin"
  "$build" "$tmp"
  rm -rf "$entry"   # an incomplete entry (never produced by these scripts) is replaced
  mv "$tmp" "$entry"
  trap - EXIT
}
