package claim

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCheckComparableVersions(t *testing.T) {
	tests := []struct {
		name    string
		info    version.Info
		wantErr string
	}{
		{"given 1.35 then tokens are sound", version.Info{Major: "1", Minor: "35", GitVersion: "v1.35.0"}, ""},
		{"given 1.37 then tokens are sound", version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, ""},
		{"given a provider minor with a plus then it parses", version.Info{Major: "1", Minor: "36+", GitVersion: "v1.36.1-gke.100"}, ""},
		{"given 1.34 then construction fails naming the version", version.Info{Major: "1", Minor: "34", GitVersion: "v1.34.4"}, "v1.34.4 does not promise comparable resourceVersions"},
		{"given an unparseable version then construction fails", version.Info{GitVersion: "v0.0.0-master"}, "cannot be parsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkComparableVersions(&tt.info)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("checkComparableVersions() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

type stubVersion version.Info

func (s stubVersion) ServerVersion() (*version.Info, error) { v := version.Info(s); return &v, nil }

func TestNewRefusesAServerWithoutComparableVersions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	// Given a 1.34 server
	_, err := New(c, c, Config{}, WithBackend(nopBackend), WithServerVersion(stubVersion{Major: "1", Minor: "34", GitVersion: "v1.34.4"}))
	// Then construction fails rather than hand out tokens that may not rise
	if err == nil || !strings.Contains(err.Error(), "fencing tokens would not be monotonic") {
		t.Fatalf("New() = %v", err)
	}
	if _, err := New(c, c, Config{}, WithBackend(nopBackend), WithServerVersion(stubVersion{Major: "1", Minor: "37"})); err != nil {
		t.Fatalf("New() on 1.37 = %v", err)
	}
}
