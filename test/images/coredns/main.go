// Command coredns is the lab's cluster DNS: CoreDNS built from its Go module with only the
// plugins the rig's Corefile uses (importing core/plugin would compile every plugin), and hosts,
// which Kubernetes' e2e suite serves from the agnhost image's /coredns (this binary there). It is
// a pod image of the lab (kovn.io/coredns), not part of kovn.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin order, a subsequence of upstream's core/dnsserver/zdirectives.go:
// a query passes through them in this order, so kubernetes, which answers, comes last.
var directives = []string{"ready", "health", "errors", "log", "cache", "hosts", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
