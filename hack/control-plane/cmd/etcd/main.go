// Command etcd is etcd's own server entry point, built from go.etcd.io/etcd/server/v3 at the
// version the wrapped Kubernetes release pins, so the control plane uses the etcd it was
// tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
