// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 at the version
// pinned in ../go.mod (the one k8s.io/kubernetes requires).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
