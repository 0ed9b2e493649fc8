package generation

import (
	"sync"
	"time"
)

// Observer judges expiry the way pkg/expiry does: from how long this process
// has seen a claim's owner unchanged on its own clock, never by comparing a
// time another machine wrote (ExpiresAt, LastHeartbeat) with the local
// clock. A claim seen for the first time, or seen changed, starts a new
// observation, so a fresh process waits a whole TTL before it takes
// anything over, and an owner whose clock is skewed is never taken over
// early. With the real clock the durations use Go's monotonic reading.
//
// The zero Observer is ready to use; it is safe for concurrent use.
type Observer struct {
	mu   sync.Mutex
	seen map[string]observation
}

type observation struct {
	mark mark
	at   time.Time
}

// mark is what changes when, and only when, a claim is granted or renewed.
type mark struct {
	owner     string
	token     FencingToken
	heartbeat time.Time
	phase     bool
}

func markOf(rec ClaimRecord) mark {
	return mark{owner: rec.OwnerGeneration, token: rec.FencingToken, heartbeat: rec.LastHeartbeat.Round(0).UTC(), phase: rec.Phase.Owned()}
}

// Observe records that rec was seen at now and reports whether its owner
// has been seen unchanged for at least ttl. A record without an owner never
// expires.
func (o *Observer) Observe(rec ClaimRecord, ttl time.Duration, now time.Time) (expired bool) {
	m := markOf(rec)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]observation{}
	}
	last, ok := o.seen[rec.Name]
	if !ok || last.mark != m {
		o.seen[rec.Name] = observation{mark: m, at: now}
		return false
	}
	return rec.Phase.Owned() && now.Sub(last.at) >= ttl
}

// Forget drops the observation of a claim whose record is gone.
func (o *Observer) Forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, name)
}
