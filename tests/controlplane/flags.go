package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
)

// apiserverArgs configures kube-apiserver as a real cluster runs it: TLS
// with the throwaway CA, Node and RBAC authorization, the default admission
// plugins plus NodeRestriction, bootstrap tokens, and service-account
// tokens (TokenRequest) signed with sa.key.
func apiserverArgs(dir, etcdURL string, port int) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The default (lease) endpoint reconciler refuses a loopback
		// advertise address; nothing in a test reaches the API through
		// the kubernetes Service anyway.
		"--endpoint-reconciler-type=none",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + f("apiserver-certs"),
		"--tls-cert-file=" + f("apiserver.crt"),
		"--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--api-audiences=https://kubernetes.default.svc",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
}

// controllers run by kube-controller-manager: the CSR signer (kubelet
// client and serving signers, with the cluster CA) and cleaner, the
// disruption budget status, garbage collection, node lifecycle (taints a
// Node whose heartbeats stop), service accounts and their tokens, the
// bootstrap-token signer and cleaner, namespaces and the root CA
// ConfigMap. Never the CSR approver: approving is winfleet's job.
var controllers = []string{
	"certificatesigningrequest-signing-controller",
	"certificatesigningrequest-cleaner-controller",
	"disruption-controller",
	"garbage-collector-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"bootstrap-signer-controller",
	"token-cleaner-controller",
	"namespace-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
}

func controllerManagerArgs(dir, kubeconfig string) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--cluster-signing-cert-file=" + f("ca.crt"),
		"--cluster-signing-key-file=" + f("ca.key"),
		"--service-account-private-key-file=" + f("sa.key"),
		"--root-ca-file=" + f("ca.crt"),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--cert-dir=" + f("kcm-certs"),
		"--v=1",
	}
}
