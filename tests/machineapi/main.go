// Command machineapi runs OpenShift's Machine API controllers for
// winfleet's tests, built from github.com/openshift/machine-api-operator as
// a Go module (nothing vendored or copied), against a test control plane:
// the MachineSet controller, the Machine controller (and its drain
// controller) with the test cloud's actuator (actuator.go), nodelink and
// the MachineHealthCheck controller (machinehealthcheck.go); with
// --webhook-port, its Machine and MachineSet webhooks (webhooks.go).
//
//	machineapi --kubeconfig <path> --cloud http://127.0.0.1:<port> [--namespace openshift-machine-api]
//	           [--webhook-port <port> --webhook-cert-dir <dir>]
//
// The actuator asks the test harness's cloud for a Machine's VM (cloud.go
// says the contract); the harness's VMs are sshd nodes on loopback. It
// prints one line
//
//	ready
//
// on stdout once its caches have synced, and stops on SIGTERM or SIGINT.
//
// It is its own Go module (tests/machineapi/go.mod), apart from the control
// plane's (tests/controlplane): machine-api-operator requires older
// Kubernetes modules than the control plane's v1.37.2, and a conflict here
// must never break that build.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	apifeatures "github.com/openshift/api/features"
	machinev1 "github.com/openshift/api/machine/v1beta1"
	"github.com/openshift/library-go/pkg/features"
	"github.com/openshift/machine-api-operator/pkg/controller/machine"
	"github.com/openshift/machine-api-operator/pkg/controller/machineset"
	"github.com/openshift/machine-api-operator/pkg/controller/nodelink"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	cloudURL := flag.String("cloud", "", "the test cloud's base URL (http://127.0.0.1:PORT)")
	namespace := flag.String("namespace", "openshift-machine-api", "the namespace of the Machines and MachineSets")
	klog.InitFlags(nil)
	// --kubeconfig is controller-runtime's own flag (what ctrl.GetConfig reads).
	flag.Parse()
	kubeconfig := flag.Lookup("kubeconfig")
	if kubeconfig == nil || kubeconfig.Value.String() == "" || *cloudURL == "" {
		fmt.Fprintln(os.Stderr, "usage: machineapi --kubeconfig <path> --cloud <url> [--namespace <ns>]")
		os.Exit(2)
	}
	ctrl.SetLogger(klog.NewKlogr())
	if err := run(*cloudURL, *namespace); err != nil {
		fmt.Fprintf(os.Stderr, "machineapi: %v\n", err)
		os.Exit(1)
	}
}

func run(cloudURL, namespace string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	// The feature gates MAO's components register, at their defaults.
	gate := feature.DefaultMutableFeatureGate
	gateOpts, err := features.NewFeatureGateOptions(gate, apifeatures.SelfManaged,
		apifeatures.FeatureGateMachineAPIMigration, apifeatures.FeatureGateVSphereHostVMGroupZonal,
		apifeatures.FeatureGateVSphereMultiDisk)
	if err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if _, err := gateOpts.ApplyTo(gate); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	opts := manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := machinev1.Install(mgr.GetScheme()); err != nil {
		return err
	}
	act := &actuator{client: mgr.GetClient(), cloud: newCloud(cloudURL)}
	if err := machine.AddWithActuator(mgr, act, gate); err != nil {
		return fmt.Errorf("machine controller: %w", err)
	}
	if err := machineset.Add(mgr, opts, gate); err != nil {
		return fmt.Errorf("machineset controller: %w", err)
	}
	if err := nodelink.Add(mgr, opts); err != nil {
		return fmt.Errorf("nodelink controller: %w", err)
	}
	if err := addMachineHealthCheck(mgr, opts); err != nil {
		return err
	}
	if err := serveWebhooks(mgr, cfg, gate); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			select {
			case <-webhooksRegistered:
			case <-ctx.Done():
				return nil
			}
			fmt.Println("ready")
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	return mgr.Start(signals.SetupSignalHandler())
}
