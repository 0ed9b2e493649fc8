package memory_test

import (
	"testing"

	"github.com/ocf-claim/claim/pkg/generation"
	"github.com/ocf-claim/claim/pkg/generation/generationtest"
	"github.com/ocf-claim/claim/pkg/generation/memory"
)

func harness(*testing.T) generationtest.Env {
	store := memory.NewStore()
	return generationtest.Env{New: func(_ *testing.T, clk generation.Clock) generation.Backend {
		return memory.New(memory.WithStore(store), memory.WithClock(clk))
	}}
}

func TestMemoryBackendHonoursTheContract(t *testing.T) {
	generationtest.Run(t, harness)
}
