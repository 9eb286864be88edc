// Command kovn-pause is the pod sandbox process: it holds the pod's namespaces, reaps zombies
// (it is PID 1 of the pod) and exits on SIGTERM/SIGINT. Built static and packed into the
// registry.k8s.io/pause image by the rig, so no image is pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
