// Command localcluster runs a small but real Kubernetes control plane on
// loopback for local demos and e2e tests: embedded etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built from k8s.io/kubernetes, kwok for
// fake nodes, a kubelet on Debian's containerd for a node that runs containers, and kubectl.
//
// It is one hyperkube-style binary: `up` re-executes the same binary once per
// component (`localcluster etcd ...`, `localcluster kube-apiserver ...`), so
// every component is a separate, detached process with its own log and PID
// file, and `down` stops exactly those PIDs.
//
// It lives in its own Go module so the product module never depends on
// k8s.io/kubernetes.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = `usage: localcluster <command> [flags]

commands:
  up                       start a local control plane (see: localcluster up -h)
  down                     stop the processes recorded by up
  load-image               load OCI archives into the node's containerd (a cluster up with --node)
  etcd                     run embedded etcd (used by up)
  kube-apiserver           run kube-apiserver (used by up)
  kube-controller-manager  run kube-controller-manager (used by up)
  kube-scheduler           run kube-scheduler (used by up)
  kubelet                  run the kubelet (used by up --node)
  kubectl                  run kubectl (also when invoked through a link named kubectl)
  helm                     run Helm (also when invoked through a link named helm)

Invoked through a link named kwok it runs kwok (kwok reads its own flags from os.Args);
through one named helm it runs Helm.
`

func main() {
	// Like hyperkube: a link named kubectl runs kubectl, so the demo and the tests have
	// the real client at the cluster's own version without another build; one named kwok
	// runs kwok, and one named helm runs Helm, both compiled against the same Kubernetes
	// libraries as the control plane.
	switch filepath.Base(os.Args[0]) {
	case "kubectl":
		os.Exit(runKubectl(os.Args[1:]))
	case "kwok":
		os.Exit(runKwok())
	case "helm":
		os.Exit(runHelm(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]

	var err error
	switch name {
	case "up":
		err = runUp(args)
	case "down":
		err = runDown(args)
	case "load-image":
		err = runLoadImage(args)
	case "etcd":
		err = runEtcd(args)
	case "kube-apiserver":
		os.Exit(runCobra(apiserver.NewAPIServerCommand(), args))
	case "kube-controller-manager":
		os.Exit(runCobra(controllermanager.NewControllerManagerCommand(), args))
	case "kube-scheduler":
		os.Exit(runCobra(scheduler.NewSchedulerCommand(), args))
	case "kubelet":
		os.Exit(runCobra(kubelet.NewKubeletCommand(context.Background()), args))
	case "kubectl":
		os.Exit(runKubectl(args))
	case "helm":
		os.Exit(runHelm(args))
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", name, err)
		os.Exit(1)
	}
}

// runCobra runs an upstream component command with our arguments; cli.Run
// sets up logging and flushes it the same way the upstream binaries do.
func runCobra(cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runKubectl runs kubectl with args, as the kubectl binary would.
func runKubectl(args []string) int {
	cmd := kubectl.NewDefaultKubectlCommandWithArgs(kubectl.KubectlOptions{
		PluginHandler: kubectl.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
		Arguments:     append([]string{"kubectl"}, args...),
		ConfigFlags:   genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag(),
		IOStreams:     genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	})
	return runCobra(cmd, args)
}
