// Command coredns is CoreDNS with only the plugins the local control plane's real node needs
// (hack/control-plane.sh, NODES=real): the cluster's DNS names (`<service>.<namespace>.svc`)
// from the kubernetes plugin, a cache, and the health and readiness endpoints. CoreDNS's own
// main registers every plugin, cloud DNS providers included; this one compiles a small part
// of that.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins in the order CoreDNS runs them (a subsequence of its plugin.cfg).
var directives = []string{"bind", "ready", "health", "errors", "loadbalance", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
