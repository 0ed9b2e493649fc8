package envtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// restartStopTimeout is how long a restartable control plane's components
// get to stop before they are killed.
const restartStopTimeout = 2 * time.Second

// Restart stops kube-apiserver and etcd, waits down, and starts both again
// on the same ports with the same etcd data, serving certificates and users,
// the way a control plane restarts under a running operator. Clients made
// before the restart stay valid; their calls fail while the control plane is
// down. A component that does not stop within a few seconds (kube-apiserver
// waits for the watches of busy clients) is killed, which is no error here.
// It requires Options.Restartable.
func (e *Env) Restart(ctx context.Context, down time.Duration) error {
	if len(e.dirs) == 0 {
		return fmt.Errorf("restarting control plane: envtest was started without Options.Restartable")
	}
	cp := &e.env.ControlPlane
	if err := cp.APIServer.Stop(); err != nil && !killed(err) {
		return fmt.Errorf("restarting control plane: stopping kube-apiserver: %w", err)
	}
	if err := cp.Etcd.Stop(); err != nil && !killed(err) {
		return fmt.Errorf("restarting control plane: stopping etcd: %w", err)
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("restarting control plane: %w", ctx.Err())
	case <-time.After(down):
	}
	if err := cp.Etcd.Start(); err != nil {
		return fmt.Errorf("restarting control plane: starting etcd on %s: %w", cp.Etcd.DataDir, err)
	}
	if err := cp.APIServer.Start(); err != nil {
		return fmt.Errorf("restarting control plane: starting kube-apiserver: %w", err)
	}
	return nil
}

// killed reports whether a Stop error only says that envtest killed a
// process that did not stop in time (envtest has no typed error for it).
func killed(err error) bool {
	return strings.HasPrefix(err.Error(), "timeout waiting for process") && !strings.Contains(err.Error(), "unable to kill")
}

// AddUser provisions a user authenticated by a client certificate and
// returns a rest.Config that acts as that user, with no permissions until
// RBAC grants some. Tests use it to prove behaviour under missing RBAC.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(crenvtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("adding envtest user %q: %w", name, err)
	}
	return rest.CopyConfig(u.Config()), nil
}

// persistentDirs creates the etcd data and API-server certificate
// directories of a restartable control plane, whose API server serves
// watches from etcd. envtest deletes directories it
// made itself when a component stops; directories given to it survive a
// restart and are removed by Stop.
func (e *Env) persistentDirs() error {
	data, err := os.MkdirTemp("", "envtest-etcd-")
	if err != nil {
		return fmt.Errorf("creating etcd data dir: %w", err)
	}
	certs, err := os.MkdirTemp("", "envtest-apiserver-")
	if err != nil {
		_ = os.RemoveAll(data)
		return fmt.Errorf("creating kube-apiserver cert dir: %w", err)
	}
	e.dirs = []string{data, certs}
	e.env.ControlPlane.Etcd = &crenvtest.Etcd{DataDir: data}
	e.env.ControlPlane.APIServer = &crenvtest.APIServer{CertDir: certs}
	// Watches are served from etcd, not from the API server's watch cache,
	// so that a watch resumes across a restart at the version it stopped at
	// instead of answering "too old" from a cache that starts empty.
	e.env.ControlPlane.APIServer.Configure().Set("watch-cache", "false")
	return nil
}
