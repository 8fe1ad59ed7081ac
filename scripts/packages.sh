# Debian packages the scripts need, installed when they are missing (sourced by test.sh,
# cluster.sh and compare-kubelet.sh; defines functions only).
#
#   need_packages WHY WANT...
#
# Each WANT is `COMMAND=PACKAGE` (the command on PATH) or `/PATH=PACKAGE` (an executable
# file). The packages of the wants not met are
# installed with apt-get, without the packages they only recommend, when running as root on
# a machine that has it (the package lists are updated only when the first attempt fails).
# Returns 0 when every want is met afterwards; otherwise prints what is missing, why it is
# needed and how to install it, to standard error, and returns 1: the caller decides whether
# that is fatal.

# What a node on containerd needs (cluster.sh --runtime containerd, the containerd tests):
# containerd with its runc shim, runc, the CNI plugins of the pod network, and a static
# busybox for the test images (scripts/build-test-images.sh).
# shellcheck disable=SC2034 # used by the scripts that source this file
CONTAINERD_WANTS=(containerd=containerd ctr=containerd containerd-shim-runc-v2=containerd
  runc=runc /usr/lib/cni/bridge=containernetworking-plugins
  /usr/lib/cni/host-local=containernetworking-plugins
  /usr/lib/cni/loopback=containernetworking-plugins
  /usr/lib/cni/portmap=containernetworking-plugins /bin/busybox=busybox-static)

# What scripts/cluster.sh itself runs: certificates, health checks, free ports, the
# components' process groups and locks.
# shellcheck disable=SC2034 # used by the scripts that source this file
CLUSTER_WANTS=(openssl=openssl curl=curl ss=iproute2 setsid=util-linux flock=util-linux
  base64=coreutils)

# wants_unmet WANT...: the packages of the wants not met, each once, on one line
wants_unmet() {
  local want what
  for want in "$@"; do
    what="${want%%=*}"
    case "$what" in
      /*) [ -x "$what" ] && continue ;;
      *) command -v "$what" >/dev/null 2>&1 && continue ;;
    esac
    echo "${want#*=}"
  done | sort -u | paste -sd ' '
}

need_packages() {
  local why="$1" missing
  shift
  missing="$(wants_unmet "$@")"
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages $missing ($why)" >&2
    # shellcheck disable=SC2086 # one word a package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null; } || true
    missing="$(wants_unmet "$@")"
    [ -z "$missing" ] && return 0
    echo "could not install the Debian packages $missing ($why)" >&2
    return 1
  fi
  echo "missing: the Debian packages $missing ($why); install them as root (apt-get install $missing)" >&2
  return 1
}
