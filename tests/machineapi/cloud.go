package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// instance is a VM as the test cloud describes it.
type instance struct {
	// ID is the cloud's name for the VM; the Machine's providerID is
	// "winfleet-test:///<ID>".
	ID string `json:"id"`
	// State is "pending" (created, booting) or "running".
	State string `json:"state"`
	// Address is the VM's InternalIP, Hostname its host name; both are
	// empty while the cloud has not assigned them yet.
	Address  string `json:"address"`
	Hostname string `json:"hostname"`
}

// cloudError is a refusal of the cloud: Permanent when the request can
// never succeed (HTTP 400: the Machine's configuration), otherwise
// transient (the Machine controller tries again).
type cloudError struct {
	Permanent bool
	Message   string
}

func (e *cloudError) Error() string { return e.Message }

// cloud is the client of the test harness's cloud, a small JSON API on
// loopback (tests/support/machine_cloud.rs serves it):
//
//	PUT    /instances/<namespace>/<machine>  {"userData": "..."} -> 200 instance (idempotent)
//	GET    /instances/<namespace>/<machine>                      -> 200 instance, 404 none
//	DELETE /instances/<namespace>/<machine>                      -> 200 (idempotent)
//
// An error answer carries {"error": "..."}; 400 is permanent.
type cloud struct {
	base string
	http *http.Client
}

func newCloud(base string) *cloud {
	return &cloud{base: base, http: &http.Client{Timeout: 30 * time.Second}}
}

func (c *cloud) path(namespace, name string) string {
	return fmt.Sprintf("%s/instances/%s/%s", c.base, url.PathEscape(namespace), url.PathEscape(name))
}

// create asks for the Machine's VM with its user data.
func (c *cloud) create(ctx context.Context, namespace, name, userData string) (*instance, error) {
	body, err := json.Marshal(map[string]string{"userData": userData})
	if err != nil {
		return nil, err
	}
	inst, found, err := c.do(ctx, http.MethodPut, c.path(namespace, name), body)
	if err == nil && !found {
		err = &cloudError{Message: "the cloud answered 404 to a create"}
	}
	return inst, err
}

// get is the Machine's VM, nil when the cloud has none.
func (c *cloud) get(ctx context.Context, namespace, name string) (*instance, error) {
	inst, found, err := c.do(ctx, http.MethodGet, c.path(namespace, name), nil)
	if err != nil || !found {
		return nil, err
	}
	return inst, nil
}

// remove deletes the Machine's VM (none is no error).
func (c *cloud) remove(ctx context.Context, namespace, name string) error {
	_, _, err := c.do(ctx, http.MethodDelete, c.path(namespace, name), nil)
	return err
}

func (c *cloud) do(ctx context.Context, method, target string, body []byte) (*instance, bool, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, false, &cloudError{Message: fmt.Sprintf("the cloud cannot be reached: %v", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, false, &cloudError{Message: fmt.Sprintf("reading the cloud's answer: %v", err)}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	case resp.StatusCode >= 300:
		var refusal struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &refusal)
		msg := fmt.Sprintf("the cloud refused %s (%d): %s", method, resp.StatusCode, refusal.Error)
		return nil, false, &cloudError{Permanent: resp.StatusCode == http.StatusBadRequest, Message: msg}
	case method == http.MethodDelete:
		return nil, true, nil
	}
	var inst instance
	if err := json.Unmarshal(data, &inst); err != nil {
		return nil, false, &cloudError{Message: fmt.Sprintf("the cloud's answer is no instance: %v", err)}
	}
	return &inst, true, nil
}
