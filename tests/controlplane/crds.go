package main

import (
	"context"
	"embed"
	"fmt"
	"path"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The OpenShift APIs winfleet reads and writes, as CustomResourceDefinitions
// with structural schemas derived from github.com/openshift/api.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

type clients struct {
	kube *kubernetes.Clientset
	ext  *apiextensions.Clientset
}

func newClients(kubeconfigPath string) (*clients, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, err
	}
	config.QPS, config.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	ext, err := apiextensions.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, ext: ext}, nil
}

// waitReady polls /readyz until it answers ok.
func (c *clients) waitReady(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = fmt.Errorf("%v: %s", err, body)
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("/readyz: %w", last)
	}
	return err
}

// installCRDs creates every embedded CRD and waits until each is Established.
func (c *clients) installCRDs(ctx context.Context) error {
	entries, err := crdFiles.ReadDir("crds")
	if err != nil {
		return err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var created []string
	for _, name := range names {
		text, err := crdFiles.ReadFile(path.Join("crds", name))
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(text, &crd); err != nil {
			return fmt.Errorf("crds/%s: %w", name, err)
		}
		_, err = c.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s (crds/%s): %w", crd.Name, name, err)
		}
		created = append(created, crd.Name)
	}
	for _, name := range created {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := c.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("CRD %s: names not accepted: %s", name, cond.Message)
				}
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	return nil
}
