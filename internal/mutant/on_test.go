//go:build chaosmutants

package mutant

import "testing"

func TestOnlyTheActiveMutantIsOn(t *testing.T) {
	// Given one mutant switched on
	saved := active
	t.Cleanup(func() { active = saved })
	active = ReleaseBeforeInner
	// When the hooks ask
	ran := 0
	for _, n := range All {
		Do(n, func() { ran++ })
	}
	// Then exactly that one is on, and it is known
	if !Is(ReleaseBeforeInner) || Is(LostKeyNeverTold) || ran != 1 {
		t.Fatalf("Is(ReleaseBeforeInner)=%t Is(LostKeyNeverTold)=%t hooks run=%d, want true false 1", Is(ReleaseBeforeInner), Is(LostKeyNeverTold), ran)
	}
	if _, err := Active(); err != nil {
		t.Fatal(err)
	}
}

func TestAnUnknownMutantIsAnError(t *testing.T) {
	// Given a mutant name that does not exist
	saved := active
	t.Cleanup(func() { active = saved })
	active = "NoSuchBug"
	// When it is checked, Then it is an error naming it, and no hook runs
	if _, err := Active(); err == nil {
		t.Fatal("Active accepted an unknown mutant")
	}
	for _, n := range All {
		Do(n, func() { t.Fatalf("hook %s ran for an unknown mutant", n) })
	}
}

func TestNoMutantByDefault(t *testing.T) {
	// Given no mutant switched on, When the hooks ask, Then none runs
	saved := active
	t.Cleanup(func() { active = saved })
	active = ""
	for _, n := range All {
		Do(n, func() { t.Fatalf("hook %s ran with no mutant on", n) })
	}
}
