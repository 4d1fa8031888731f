// Command pause is the sandbox ("pause") container of the local node's Pods: it holds the
// Pod's namespaces, reaps the zombies its children leave (it is PID 1 of the Pod when the
// Pod shares its process namespace) and exits on SIGINT or SIGTERM. The node's container
// runtime gets it as an image built from this binary, so no image is pulled from anywhere.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
