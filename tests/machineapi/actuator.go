package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1beta1"
	"github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// providerIDPrefix is the scheme of the test cloud's provider IDs.
const providerIDPrefix = "winfleet-test:///"

// actuator is the Machine controller's cloud provider for the tests: it
// creates, finds, refreshes and deletes a Machine's VM through the test
// cloud, and records on the Machine what a real provider does (providerID,
// addresses, the instance state), so that nodelink can link the Node the
// VM's kubelet registers.
type actuator struct {
	client client.Client
	cloud  *cloud
}

var _ machine.Actuator = (*actuator)(nil)

// Create asks the cloud for the Machine's VM with the user data of the
// Secret its providerSpec names, as a cloud provider does.
func (a *actuator) Create(ctx context.Context, m *machinev1.Machine) error {
	userData, err := a.userData(ctx, m)
	if err != nil {
		return err
	}
	inst, err := a.cloud.create(ctx, m.Namespace, m.Name, userData)
	if err != nil {
		return providerError(err, machine.CreateMachine)
	}
	klog.Infof("%s: the cloud created instance %s (%s)", m.Name, inst.ID, inst.State)
	return a.record(ctx, m, inst)
}

// Exists tells whether the cloud has the Machine's VM.
func (a *actuator) Exists(ctx context.Context, m *machinev1.Machine) (bool, error) {
	inst, err := a.cloud.get(ctx, m.Namespace, m.Name)
	if err != nil {
		return false, err
	}
	return inst != nil, nil
}

// Update refreshes what the Machine records of its VM.
func (a *actuator) Update(ctx context.Context, m *machinev1.Machine) error {
	inst, err := a.cloud.get(ctx, m.Namespace, m.Name)
	if err != nil {
		return providerError(err, machine.UpdateMachine)
	}
	if inst == nil {
		return machine.UpdateMachine("the cloud has no instance for %s", m.Name)
	}
	return a.record(ctx, m, inst)
}

// Delete asks the cloud to delete the Machine's VM.
func (a *actuator) Delete(ctx context.Context, m *machinev1.Machine) error {
	if err := a.cloud.remove(ctx, m.Namespace, m.Name); err != nil {
		return providerError(err, machine.DeleteMachine)
	}
	return nil
}

// userData is the `userData` key of the Secret named by the Machine's
// providerSpec `userDataSecret` (in the Machine's namespace).
func (a *actuator) userData(ctx context.Context, m *machinev1.Machine) (string, error) {
	var spec struct {
		UserDataSecret *corev1.LocalObjectReference `json:"userDataSecret"`
	}
	if m.Spec.ProviderSpec.Value != nil {
		if err := json.Unmarshal(m.Spec.ProviderSpec.Value.Raw, &spec); err != nil {
			return "", machine.InvalidMachineConfiguration("providerSpec: %v", err)
		}
	}
	if spec.UserDataSecret == nil || spec.UserDataSecret.Name == "" {
		return "", nil
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: m.Namespace, Name: spec.UserDataSecret.Name}
	if err := a.client.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			// A Secret that comes later (winfleet writes it) is waited for.
			return "", fmt.Errorf("user data secret %s not found", key)
		}
		return "", err
	}
	data, ok := secret.Data["userData"]
	if !ok {
		return "", machine.InvalidMachineConfiguration("secret %s has no userData key", key)
	}
	return string(data), nil
}

// record writes the VM's provider ID, addresses and state on the Machine
// (in place: the Machine controller reads them from `m` afterwards).
func (a *actuator) record(ctx context.Context, m *machinev1.Machine, inst *instance) error {
	before := m.DeepCopy()
	providerID := providerIDPrefix + inst.ID
	m.Spec.ProviderID = &providerID
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[machine.MachineInstanceStateAnnotationName] = inst.State
	if err := a.client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("recording the instance on %s: %w", m.Name, err)
	}
	before = m.DeepCopy()
	m.Status.Addresses = nil
	if inst.Address != "" {
		m.Status.Addresses = append(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: inst.Address})
	}
	if inst.Hostname != "" {
		m.Status.Addresses = append(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: inst.Hostname})
		m.Status.Addresses = append(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: inst.Hostname})
	}
	status, err := json.Marshal(map[string]string{"instanceId": inst.ID, "instanceState": inst.State})
	if err != nil {
		return err
	}
	m.Status.ProviderStatus = &runtime.RawExtension{Raw: status}
	if err := a.client.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("recording the addresses of %s: %w", m.Name, err)
	}
	return nil
}

// providerError maps a refusal of the cloud to the Machine API's errors: a
// permanent one is an invalid configuration (the Machine goes Failed), any
// other one is retried.
func providerError(err error, wrap func(string, ...interface{}) *machine.MachineError) error {
	var refusal *cloudError
	if errors.As(err, &refusal) && refusal.Permanent {
		return machine.InvalidMachineConfiguration("%s", refusal.Message)
	}
	return wrap("%v", err)
}
