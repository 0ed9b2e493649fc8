//go:build !chaosmutants

package mutant

import "testing"

func TestNoMutantWithoutTheBuildTag(t *testing.T) {
	// Given a binary built without the tag, When the hooks ask, Then none
	// runs
	for _, n := range All {
		Do(n, func() { t.Fatalf("hook %s ran in a binary built without -tags %s", n, Tag) })
		if Is(n) {
			t.Fatalf("Is(%s) in a binary built without -tags %s", n, Tag)
		}
	}
}

func TestAMutantAskedForWithoutTheBuildTagIsAnError(t *testing.T) {
	// Given CHAOS_MUTANT set for a binary built without the tag
	t.Setenv(Env, string(ReleaseBeforeInner))
	// When the checker asks which mutant is on, Then it is told none can be
	if _, err := Active(); err == nil {
		t.Fatalf("Active accepted %s=%s in a binary built without -tags %s", Env, ReleaseBeforeInner, Tag)
	}
}
