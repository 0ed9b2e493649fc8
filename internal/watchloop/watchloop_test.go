package watchloop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/ocf-claim/claim/internal/watchloop"
)

// TestAWatchEndsByTheSameRulesForEveryBackend pins how Each ends a watch:
// nil once the caller's context ends or its handler is done, ErrClosed when
// the server closes the watch, the handler's error as it is; the events
// before the end reach the handler in order, and the watch is stopped.
func TestAWatchEndsByTheSameRulesForEveryBackend(t *testing.T) {
	errHandler := errors.New("handler refused the event")
	tests := []struct {
		name string
		// send is how many events the server sends; the handler returns
		// doneAt or failAt on the event of that number (0: never).
		send, doneAt, failAt int
		closeAfter           bool // the server closes the watch after sending
		cancelAfter          bool // the caller's context ends after sending
		wantErr              error
		wantSeen             []string
	}{
		{name: "the server closes the watch", send: 2, closeAfter: true, wantErr: watchloop.ErrClosed, wantSeen: []string{"e1", "e2"}},
		{name: "the caller's context ends", send: 1, cancelAfter: true, wantSeen: []string{"e1"}},
		{name: "the handler is done", send: 3, doneAt: 2, wantSeen: []string{"e1", "e2"}},
		{name: "the handler fails", send: 3, failAt: 1, wantErr: errHandler, wantSeen: []string{"e1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a watch whose server sends tt.send events
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fw := watch.NewFakeWithChanSize(tt.send, false)
			for i := 1; i <= tt.send; i++ {
				fw.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e" + string(rune('0'+i))}})
			}
			var seen []string
			// When Each reads it
			err := watchloop.Each(ctx, fw, func(ev watch.Event) (bool, error) {
				seen = append(seen, ev.Object.(*corev1.ConfigMap).Name)
				n := len(seen)
				if n == tt.failAt {
					return false, errHandler
				}
				if n == tt.send {
					switch {
					case tt.closeAfter:
						fw.Stop()
					case tt.cancelAfter:
						cancel()
					}
				}
				return n == tt.doneAt, nil
			})
			// Then it ends by the rule, after the events before the end
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Each returned %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("events handled (-want +got):\n%s", diff)
			}
			// And the watch is stopped
			if !fw.IsStopped() {
				t.Error("Each returned without stopping the watch")
			}
		})
	}
}
