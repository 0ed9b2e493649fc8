package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/history"
)

// TestAnAPIServerRestartDuringContention restarts kube-apiserver and etcd
// (keeping etcd's data) while the randomized run contends: no double grant,
// nothing leaks, and the same participants, whose calls failed while the
// control plane was away, go on being granted afterwards.
func TestAnAPIServerRestartDuringContention(t *testing.T) {
	// Given a control plane of its own that can restart
	e, err := envtest.Start(envtest.Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	var restartedAt time.Time
	r := small
	r.on = e
	r.during = func(ctx context.Context) error {
		// When the control plane restarts in the middle of contention
		time.Sleep(500 * time.Millisecond)
		if err := e.Restart(ctx, 500*time.Millisecond); err != nil {
			return err
		}
		restartedAt = time.Now()
		time.Sleep(time.Second) // contention goes on against the new server
		return nil
	}
	res := r.play(t, 7)

	// Then the history keeps every promise
	if len(res.violations) > 0 {
		t.Fatalf("restart run: %s", history.Report(res.summary, res.violations))
	}
	// And participants that lived through the restart were granted after it
	// without being restarted themselves.
	if res.afterRestart(restartedAt) == 0 {
		t.Fatalf("no grant after the restart: the participants did not recover (%s)", history.Report(res.summary, nil))
	}
	t.Logf("restart run: %s %s", history.Report(res.summary, nil), res.stats)
}
