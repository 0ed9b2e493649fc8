package claim_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// A key normalizer that is deterministic but not idempotent: applying it twice
// gives another key. Every method must apply it exactly once.
func tenantKey(key string) (string, error) { return "tenant-a/" + key, nil }

func TestKeysAreNormalizedExactlyOnce(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "claims", Normalize: tenantKey})
	if err != nil {
		t.Fatal(err)
	}
	self := claim.Holder{Kind: "Database", Namespace: "a", Name: "db", UID: "uid-db"}

	// Given a key acquired through a non-idempotent key normalizer
	_, o, err := c.Acquire(ctx, "orders", self)
	if err != nil || !o.Granted() {
		t.Fatalf("acquiring: %v, %+v", err, o)
	}
	// Then the record is written for Normalize(key), not Normalize(Normalize(key))
	if o.Key != "tenant-a/orders" {
		t.Errorf("outcome key %q, want %q", o.Key, "tenant-a/orders")
	}
	// And Holds, Renew and a second Acquire of the raw key find it held
	if held, err := c.Holds(ctx, "orders", self); err != nil || !held {
		t.Errorf("Holds(raw key) = %t, %v; want true", held, err)
	}
	if _, err := expiry.Renew(ctx, c, "orders", self); err != nil {
		t.Errorf("Renew(raw key): %v", err)
	}
	if _, again, err := c.Acquire(ctx, "orders", self); err != nil || again.Reason != claim.ReasonHeld {
		t.Errorf("second Acquire: %v, %s; want Held", err, again.Reason)
	}
	// And Holdings reports the normalized key, which ReleaseRecords frees
	recs, err := c.Holdings(ctx, self)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	if diff := cmp.Diff([]string{"tenant-a/orders"}, keys); diff != "" {
		t.Errorf("holdings (-want +got):\n%s", diff)
	}
	released, err := c.ReleaseRecords(ctx, self, recs...)
	if err != nil || len(released) != 1 {
		t.Fatalf("ReleaseRecords: %q, %v", released, err)
	}
	if held, _ := c.Holds(ctx, "orders", self); held {
		t.Error("key still held after ReleaseRecords")
	}
}

func TestOnlyTheNormalizedKeyIsValidated(t *testing.T) {
	// Given a key normalizer that keeps only the part after the last '#'
	short := func(key string) (string, error) { return key[strings.LastIndex(key, "#")+1:], nil }
	c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "claims", Normalize: short})
	if err != nil {
		t.Fatal(err)
	}
	// When the raw key is longer than MaxKeyLength but normalizes to a short one
	raw := strings.Repeat("x", claim.MaxKeyLength+100) + "#orders"
	norm, err := c.NormalizeKey(raw)
	// Then it is accepted
	if err != nil || norm != "orders" {
		t.Fatalf("NormalizeKey = %q, %v; want %q", norm, err, "orders")
	}
	// And a key that normalizes to an invalid one is refused without echoing the raw key
	_, err = c.NormalizeKey(strings.Repeat("y", 40) + "#")
	if err == nil || strings.Contains(err.Error(), "yyyy") {
		t.Fatalf("NormalizeKey of a key normalizing to empty: %v; want an error not echoing the raw key", err)
	}
}

// stripUserinfo is the key normalizer a consumer writes for URL keys: it drops the
// user info and a trailing slash.
func stripUserinfo(key string) (string, error) {
	u, err := url.Parse(key)
	if err != nil {
		return "", err
	}
	u.User = nil
	return strings.TrimSuffix(u.String(), "/"), nil
}

// firstPath keeps the part of a key before its first '#': long raw keys
// (a URL with a huge fragment) normalize to short ones.
func firstPath(key string) (string, error) {
	head, _, _ := strings.Cut(key, "#")
	return head, nil
}

func TestNormalizeKey(t *testing.T) {
	const password = "s3cr3t-pa55"
	tests := []struct {
		name    string
		keyFunc func(string) (string, error)
		raw     string
		want    string
		wantErr string
	}{
		{
			name: "given a raw key over the limit that normalizes to a short one then only the short one is validated",
			raw:  "https://es.data.svc#" + strings.Repeat("f", 2*claim.MaxKeyLength), keyFunc: firstPath,
			want: "https://es.data.svc",
		},
		{
			name: "given a raw URL with user info that Normalize strips then the stripped key is used",
			raw:  "https://admin:" + password + "@keycloak.example.com/realms/main/", keyFunc: stripUserinfo,
			want: "https://keycloak.example.com/realms/main",
		},
		{
			name: "given a decomposed umlaut then the key is composed (NFC)",
			raw:  "realm/u\u0308mlaut",
			want: "realm/\u00fcmlaut",
		},
		{
			name: "given a raw key that is not UTF-8 then it is refused before Normalize",
			raw:  "realm/\xff", keyFunc: func(k string) (string, error) { return strings.ToValidUTF8(k, "?"), nil },
			wantErr: "is not valid UTF-8",
		},
		{
			name:    "given user info that Normalize keeps then the refusal does not echo the password",
			raw:     "https://admin:" + password + "@keycloak.example.com/realms/main",
			wantErr: `normalized key: invalid claim key: key "https://REDACTED@keycloak.example.com/realms/main" looks like a URL with credentials`,
		},
		{
			name: "given a key normalizer that refuses a key with user info then the raw key is not echoed",
			raw:  "not a url://admin:" + password + "@host\x7f", keyFunc: func(string) (string, error) { return "", errors.New("unparseable") },
			wantErr: `normalizing a key of 35 bytes: unparseable`,
		},
		{
			name:    "given a zero-width space then it is refused after normalizing",
			raw:     "realm/a\u200bb",
			wantErr: "format character U+200B",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns", Normalize: tt.keyFunc})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.NormalizeKey(tt.raw)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("NormalizeKey() = %v, want %q", err, tt.want)
			case tt.wantErr == "" && got != tt.want:
				t.Fatalf("NormalizeKey() = %q, want %q", got, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("NormalizeKey() = %q, %v; want an error containing %q", got, err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, claim.ErrInvalidKey):
				t.Fatalf("NormalizeKey() = %v, does not wrap ErrInvalidKey", err)
			case err != nil && strings.Contains(err.Error(), password):
				t.Fatalf("NormalizeKey() = %v: echoes the password", err)
			}
		})
	}
}

// TestTwoSpellingsOfOneCharacterAreOneClaim: Given "ümlaut" spelled
// composed by one holder and decomposed by another, When both acquire, Then
// they compete for one claim.
func TestTwoSpellingsOfOneCharacterAreOneClaim(t *testing.T) {
	ctx := context.Background()
	c := memClaimer(t)
	a := claim.Holder{Kind: "Realm", Namespace: "ns", Name: "a", UID: "uid-a"}
	b := claim.Holder{Kind: "Realm", Namespace: "ns", Name: "b", UID: "uid-b"}
	wantAcquire(t, c, "realm/\u00fcmlaut", a, claim.ReasonAcquired, "Acquire(composed)")

	_, o, err := c.Acquire(ctx, "realm/u\u0308mlaut", b)

	if err != nil || o.Reason != claim.ReasonHeldElsewhere || !o.Holder.Is(a) {
		t.Fatalf("Acquire(decomposed) = %s by %s, %v; want HeldElsewhere by %s", o.Reason, o.Holder, err, a)
	}
}
