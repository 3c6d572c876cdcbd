package main

// machine-api-operator's admission webhooks for Machines and MachineSets
// (its pkg/webhooks, as a module), served over TLS with the test harness's
// certificate and registered with the test API server the way MAO
// registers them: its own MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration `machine-api` (names, rules, paths,
// failurePolicy Ignore, sideEffects None), with the harness's CA as the
// caBundle. The one change: the API server reaches the webhook at
// https://127.0.0.1:<port><path> (a URL, as envtest registers webhooks),
// not through the Service machine-api-operator-webhook, which has no
// endpoints here.
//
//	--webhook-port <port> --webhook-cert-dir <dir>
//
// The directory holds server.pem, server-key.pem (for 127.0.0.1) and
// ca.pem (the CA that signed them), as the harness's test CA writes them
// (tests/support/registry.rs, Ca). Without --webhook-port nothing of this runs.
//
// MAO's webhooks read Infrastructure `cluster` (the platform: for None
// both the defaulting and the validation of the providerSpec are no-ops;
// the Machine defaulter adds the label machine.openshift.io/cluster-api-cluster
// with the infrastructure name) and DNS `cluster` (the validator's
// "disconnected" check); the test control plane seeds both.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	mapiwebhooks "github.com/openshift/machine-api-operator/pkg/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

var (
	webhookPort    = flag.Int("webhook-port", 0, "serve MAO's Machine and MachineSet webhooks on 127.0.0.1:PORT and register them (0: no webhooks)")
	webhookCertDir = flag.String("webhook-cert-dir", "", "the webhooks' server.pem, server-key.pem and ca.pem")
)

// webhooksRegistered is closed once the webhooks serve and are registered
// with the API server (at once when there are none).
var webhooksRegistered = make(chan struct{})

// serveWebhooks serves MAO's four webhooks and registers them once they
// answer; without --webhook-port it only says they are registered.
func serveWebhooks(mgr manager.Manager, cfg *rest.Config, gate featuregate.MutableFeatureGate) error {
	if *webhookPort == 0 {
		close(webhooksRegistered)
		return nil
	}
	if *webhookCertDir == "" {
		return fmt.Errorf("--webhook-port needs --webhook-cert-dir")
	}
	ca, err := os.ReadFile(filepath.Join(*webhookCertDir, "ca.pem"))
	if err != nil {
		return fmt.Errorf("the webhooks' CA: %w", err)
	}
	machineDefaulter, err := mapiwebhooks.NewMachineDefaulter()
	if err != nil {
		return fmt.Errorf("the Machine defaulting webhook: %w", err)
	}
	machineValidator, err := mapiwebhooks.NewMachineValidator(mgr.GetClient(), gate)
	if err != nil {
		return fmt.Errorf("the Machine validating webhook: %w", err)
	}
	machineSetDefaulter, err := mapiwebhooks.NewMachineSetDefaulter()
	if err != nil {
		return fmt.Errorf("the MachineSet defaulting webhook: %w", err)
	}
	machineSetValidator, err := mapiwebhooks.NewMachineSetValidator(mgr.GetClient(), gate)
	if err != nil {
		return fmt.Errorf("the MachineSet validating webhook: %w", err)
	}
	server := webhook.NewServer(webhook.Options{
		Host:     "127.0.0.1",
		Port:     *webhookPort,
		CertDir:  *webhookCertDir,
		CertName: "server.pem",
		KeyName:  "server-key.pem",
	})
	server.Register(mapiwebhooks.DefaultMachineMutatingHookPath, &webhook.Admission{Handler: machineDefaulter})
	server.Register(mapiwebhooks.DefaultMachineValidatingHookPath, &webhook.Admission{Handler: machineValidator})
	server.Register(mapiwebhooks.DefaultMachineSetMutatingHookPath, &webhook.Admission{Handler: machineSetDefaulter})
	server.Register(mapiwebhooks.DefaultMachineSetValidatingHookPath, &webhook.Admission{Handler: machineSetValidator})
	if err := mgr.Add(server); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		started := server.StartedChecker()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return started(nil) == nil, nil
		})
		if err != nil {
			return fmt.Errorf("the webhook server did not start: %w", err)
		}
		if err := register(ctx, kube, ca); err != nil {
			return err
		}
		close(webhooksRegistered)
		<-ctx.Done()
		return nil
	}))
}

// hookURL is where the API server calls the webhook at path.
func hookURL(path *string) *string {
	u := fmt.Sprintf("https://127.0.0.1:%d%s", *webhookPort, *path)
	return &u
}

// register creates (or replaces) MAO's webhook configurations, each
// webhook's clientConfig a URL with the harness's CA.
func register(ctx context.Context, kube *kubernetes.Clientset, ca []byte) error {
	mutating := mapiwebhooks.NewMachineMutatingWebhookConfiguration()
	for i := range mutating.Webhooks {
		c := &mutating.Webhooks[i].ClientConfig
		c.URL, c.Service, c.CABundle = hookURL(c.Service.Path), nil, ca
	}
	validating := mapiwebhooks.NewMachineValidatingWebhookConfiguration()
	for i := range validating.Webhooks {
		c := &validating.Webhooks[i].ClientConfig
		c.URL, c.Service, c.CABundle = hookURL(c.Service.Path), nil, ca
	}
	mutations := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := mutations.Delete(ctx, mutating.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing MutatingWebhookConfiguration %s: %w", mutating.Name, err)
	}
	if _, err := mutations.Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering MutatingWebhookConfiguration %s: %w", mutating.Name, err)
	}
	validations := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := validations.Delete(ctx, validating.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing ValidatingWebhookConfiguration %s: %w", validating.Name, err)
	}
	if _, err := validations.Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering ValidatingWebhookConfiguration %s: %w", validating.Name, err)
	}
	return nil
}
