package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// freePort asks the kernel for a free loopback port. Another process may
// take it before it is used; the window is small and a test run retries
// the whole start.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

// startEtcd runs a single-member etcd in this process, data under dir/etcd.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = filepath.Join(dir, "etcd")
	client, peer := loopbackURL(clientPort), loopbackURL(peerPort)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// A test cluster: durability across power loss does not matter, speed does.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", errors.New("etcd was not ready within 60s")
	}
	return e, client.String(), nil
}

// child is a component running in a child process of this binary.
type child struct {
	name string
	args []string
	log  string
	// pidFile, when set, holds the running process's id (the harness
	// kills kube-apiserver outright through it).
	pidFile string
	cmd     *exec.Cmd
	// done is closed when the process has exited; err is then its exit.
	done chan struct{}
	err  error
}

func (c *child) start() error {
	out, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c.cmd = exec.Command(self, append([]string{c.name}, c.args...)...)
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// The children die with this process, even when it is killed outright.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	if c.pidFile != "" {
		// Written beside and renamed: a reader never sees half a number.
		tmp := c.pidFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", c.cmd.Process.Pid)), 0o600); err == nil {
			_ = os.Rename(tmp, c.pidFile)
		}
	}
	done := make(chan struct{})
	c.done = done
	cmd := c.cmd
	go func() {
		c.err = cmd.Wait()
		out.Close()
		close(done)
	}()
	return nil
}

// stop asks the child to terminate, then kills it after a grace period.
func (c *child) stop(grace time.Duration) {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// tail is the end of a child's log, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

func run(dir string, signals <-chan os.Signal) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newAuthority(dir)
	if err != nil {
		return fmt.Errorf("generating the CA: %w", err)
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	hosts := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	for _, c := range []struct {
		name, cn string
		orgs     []string
	}{
		{"admin", "winfleet-test-admin", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", []string{"system:masters"}},
	} {
		if err := ca.issue(dir, c.name, c.cn, c.orgs, nil, nil); err != nil {
			return err
		}
	}
	if err := ca.issue(dir, "apiserver", "kube-apiserver", nil, hosts, loopback); err != nil {
		return err
	}
	if err := serviceAccountKey(dir); err != nil {
		return fmt.Errorf("generating the service-account key: %w", err)
	}

	etcd, etcdURL, err := startEtcd(dir)
	if err != nil {
		return err
	}
	defer etcd.Close()

	port, err := freePort()
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	admin, err := kubeconfig(dir, "admin", server)
	if err != nil {
		return err
	}
	kcmConfig, err := kubeconfig(dir, "kube-controller-manager", server)
	if err != nil {
		return err
	}
	apiserver := &child{
		name:    "kube-apiserver",
		args:    apiserverArgs(dir, etcdURL, port),
		log:     filepath.Join(dir, "kube-apiserver.log"),
		pidFile: filepath.Join(dir, "kube-apiserver.pid"),
	}
	kcm := &child{name: "kube-controller-manager", args: controllerManagerArgs(dir, kcmConfig), log: filepath.Join(dir, "kube-controller-manager.log")}
	// Deferred calls run last first: kube-controller-manager stops before
	// the API server it talks to.
	defer apiserver.stop(10 * time.Second)
	defer kcm.stop(3 * time.Second)

	if err := apiserver.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	client, err := newClients(admin)
	if err != nil {
		return err
	}
	ready := make(chan error, 1)
	go func() { ready <- client.waitReady(ctx) }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("kube-apiserver: %w\n%s", err, tail(apiserver.log))
		}
	case <-apiserver.done:
		return fmt.Errorf("kube-apiserver exited: %v\n%s", apiserver.err, tail(apiserver.log))
	case s := <-signals:
		return fmt.Errorf("stopped by %v before ready", s)
	}
	if err := kcm.start(); err != nil {
		return err
	}
	if err := client.installCRDs(ctx); err != nil {
		return err
	}
	fmt.Printf("ready %s\n", admin)

	restart := make(chan os.Signal, 1)
	signalRestart(restart)
	revived := 0
	for {
		select {
		case s := <-signals:
			fmt.Fprintf(os.Stderr, "controlplane: %v: stopping\n", s)
			return nil
		case <-apiserver.done:
			// Killed outright (a test's SIGKILL, an OOM kill): started again
			// on the same etcd, port and certificates, as the kubelet
			// restarts a static pod. A kube-apiserver that keeps dying
			// ends the control plane instead of looping.
			revived++
			if revived > maxRevivals {
				return fmt.Errorf("kube-apiserver exited %d times: %v\n%s", revived, apiserver.err, tail(apiserver.log))
			}
			fmt.Fprintf(os.Stderr, "controlplane: kube-apiserver exited (%v): starting it again\n", apiserver.err)
			if err := revive(apiserver, client); err != nil {
				return err
			}
			fmt.Println("revived")
		case <-kcm.done:
			return fmt.Errorf("kube-controller-manager exited: %v\n%s", kcm.err, tail(kcm.log))
		case <-restart:
			// SIGUSR1: restart kube-apiserver on the same port and etcd
			// (every watch ends; clients must resume or relist).
			apiserver.stop(20 * time.Second)
			if err := revive(apiserver, client); err != nil {
				return err
			}
			fmt.Println("restarted")
		}
	}
}

// maxRevivals is how many times a kube-apiserver that exited on its own
// is started again.
const maxRevivals = 5

// revive starts kube-apiserver again (same flags: etcd, port,
// certificates) and waits until it is ready.
func revive(apiserver *child, client *clients) error {
	if err := apiserver.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := client.waitReady(ctx); err != nil {
		return fmt.Errorf("kube-apiserver after a restart: %w\n%s", err, tail(apiserver.log))
	}
	return nil
}
