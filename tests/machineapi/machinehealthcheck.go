package main

import (
	"fmt"

	"github.com/openshift/machine-api-operator/pkg/controller/machinehealthcheck"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// addMachineHealthCheck adds machine-api-operator's MachineHealthCheck
// controller (pkg/controller/machinehealthcheck, used as a module) to mgr:
// it deletes a Machine its MachineHealthCheck selects when the Machine is
// Failed, when it has no Node nodeStartupTimeout after its status last
// changed (status.lastUpdated), or when its Node meets an unhealthy
// condition for its timeout. Its CRD is the control plane's
// (tests/controlplane/crds, openshift/api's manifest).
func addMachineHealthCheck(mgr manager.Manager, opts manager.Options) error {
	if err := machinehealthcheck.Add(mgr, opts); err != nil {
		return fmt.Errorf("machinehealthcheck controller: %w", err)
	}
	return nil
}
