package generation

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// DecideRegister decides a RegisterGeneration of gen given cur, the stored
// generation of gen.ID (nil when there is none): the generation to store,
// or nil when it is registered already. The stored generation is joining,
// StartedAt defaults to now and UpdatedAt is now.
func DecideRegister(cur *Generation, gen Generation, now time.Time) (*Generation, error) {
	if err := firstErr(checkName("Generation.ID", gen.ID), checkName("Generation.Service", gen.Service), checkFields(gen)); err != nil {
		return nil, err
	}
	if gen.State != "" && gen.State != GenerationJoining {
		return nil, fmt.Errorf("%w: Generation.State %q: a generation registers %s", ErrInvalidRequest, gen.State, GenerationJoining)
	}
	if cur != nil {
		if cur.Service != gen.Service || cur.Instance != gen.Instance {
			return nil, fmt.Errorf("%w: generation %q is registered for service %q instance %q, not %q %q", ErrInvalidRequest, gen.ID, cur.Service, cur.Instance, gen.Service, gen.Instance)
		}
		return nil, nil
	}
	next := gen
	next.State = GenerationJoining
	if next.StartedAt.IsZero() {
		next.StartedAt = now
	}
	next.UpdatedAt = now
	return &next, nil
}

// DecideUpdate decides an UpdateGeneration: gen's State and Reason replace
// cur's when the life cycle allows the move ([GenerationState.CanBecome]);
// Service, Instance and StartedAt cannot change. It returns the generation
// to store.
func DecideUpdate(cur *Generation, gen Generation, now time.Time) (*Generation, error) {
	if err := firstErr(checkName("Generation.ID", gen.ID), checkFields(gen)); err != nil {
		return nil, err
	}
	if !gen.State.Valid() {
		return nil, fmt.Errorf("%w: Generation.State %q is not a generation state", ErrInvalidRequest, gen.State)
	}
	if cur == nil {
		return nil, fmt.Errorf("generation %q: %w", gen.ID, ErrGenerationNotFound)
	}
	if (gen.Service != "" && gen.Service != cur.Service) || (gen.Instance != "" && gen.Instance != cur.Instance) {
		return nil, fmt.Errorf("%w: generation %q is service %q instance %q; Service and Instance cannot change", ErrInvalidRequest, gen.ID, cur.Service, cur.Instance)
	}
	if !cur.State.CanBecome(gen.State) {
		return nil, fmt.Errorf("generation %q: %s to %s: %w", gen.ID, cur.State, gen.State, ErrInvalidTransition)
	}
	next := *cur
	next.State, next.Reason, next.UpdatedAt = gen.State, gen.Reason, now
	return &next, nil
}

// maxReasonLen bounds Generation.Reason, which is for people.
const maxReasonLen = 1024

// checkFields bounds the free-form fields of a generation.
func checkFields(gen Generation) error {
	switch {
	case len(gen.Instance) > maxNameLen || !utf8.ValidString(gen.Instance):
		return fmt.Errorf("%w: Generation.Instance %.40q... is longer than %d bytes or not UTF-8", ErrInvalidRequest, gen.Instance, maxNameLen)
	case len(gen.Reason) > maxReasonLen || !utf8.ValidString(gen.Reason):
		return fmt.Errorf("%w: Generation.Reason %.40q... is longer than %d bytes or not UTF-8", ErrInvalidRequest, gen.Reason, maxReasonLen)
	}
	return nil
}
