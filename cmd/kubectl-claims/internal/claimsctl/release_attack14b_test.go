package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestAttack14bReleaseNamesAWaiterInAnotherNamespace: promise: `release`
// refuses while the holder lives and says who would get the key, a waiter if
// any. Keys are cluster-wide, so contenders are often in other namespaces
// than the holder; claimmw's default disclosure (DiscloseSameNamespace)
// then words the waiter's condition "Key %q is held by another object,
// outside this namespace." (pkg/claimmw/disclose.go). The plugin only
// recognises messages that name the holder, so it says "none is found
// waiting for it, so most likely the holder ... itself", which is wrong:
// the parked object in another namespace gets the key.
func TestAttack14bReleaseNamesAWaiterInAnotherNamespace(t *testing.T) {
	rc := newReleaseCase(t, true)
	other := rc.ns + "-b"
	namespace(t, other)
	// The condition claimmw writes by default on a Widget parked behind a
	// holder in another namespace.
	w := widget(t, other, "waiter", conditions.ReasonParked, fmt.Sprintf("Key %q is held by another object, outside this namespace.", releaseKey))
	// The other release cases share releaseKey and list Widgets of every
	// namespace: this waiter must not outlive the case.
	t.Cleanup(func() {
		if err := writer(t).Delete(context.Background(), w); err != nil {
			t.Errorf("deleting the waiter: %v", err)
		}
	})

	r := run(t, rc.n, nil, rc.args("--holder-uid", string(rc.holder.UID))...)
	if !errors.Is(r.err, ErrRefused) {
		t.Fatalf("release while the holder exists: want ErrRefused, got %v", r.err)
	}
	msg := ErrorText(r.err)
	if !strings.Contains(msg, other+"/waiter") {
		t.Errorf("refusal does not name the waiter %s/waiter, which gets the key once the record is gone:\n%s", other, msg)
	}
}
