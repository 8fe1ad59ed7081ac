//go:build tools

// Package e2e pins what scripts/build-e2e.sh builds: this file is never compiled (the tools
// build tag), it only keeps `go mod tidy` from dropping the modules.
package e2e

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
