// Command controlplane runs a real Kubernetes control plane for winfleet's
// tests: embedded etcd, kube-apiserver and kube-controller-manager, all
// built from the Kubernetes Go modules (v1.37.2), on free loopback ports.
//
//	controlplane <data dir>
//
// It writes a throwaway CA, serving and client certificates, a
// service-account signing key and an admin kubeconfig (group
// system:masters) into the data dir, installs the OpenShift CRDs embedded
// in the binary (crds/*.yaml), and prints one line
//
//	ready <admin kubeconfig path>
//
// on stdout once /readyz answers ok and every CRD is Established. It stops
// everything on SIGTERM or SIGINT.
//
// It supervises kube-apiserver: on SIGUSR1 it restarts it (then prints
// "restarted"); when it exits on its own (a SIGKILL through the id in
// <data dir>/kube-apiserver.pid) it starts it again on the same etcd, port
// and certificates (then prints "revived"), up to five times.
//
// kube-apiserver and kube-controller-manager each run in a child process of
// this same binary (`controlplane kube-apiserver <flags>`), through their
// upstream cobra commands: both install process-wide signal handlers and
// feature gates, which cannot be shared by two components in one process.
// etcd runs in this process (go.etcd.io/etcd/server/v3/embed).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	kubeapiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kubecontrollermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "kube-apiserver":
			cmd := kubeapiserver.NewAPIServerCommand()
			cmd.SetArgs(os.Args[2:])
			if err := cmd.Execute(); err != nil {
				os.Exit(1)
			}
			return
		case "kube-controller-manager":
			cmd := kubecontrollermanager.NewControllerManagerCommand()
			cmd.SetArgs(os.Args[2:])
			if err := cmd.Execute(); err != nil {
				os.Exit(1)
			}
			return
		}
	}
	if len(os.Args) != 2 || os.Args[1] == "" || os.Args[1][0] == '-' {
		fmt.Fprintln(os.Stderr, "usage: controlplane <data dir>")
		os.Exit(2)
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := run(os.Args[1], signals); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}
