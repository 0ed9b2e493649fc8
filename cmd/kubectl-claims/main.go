// Command kubectl-claims is a kubectl plugin that shows and operates
// ocf-claim claims: `kubectl claims list`, `kubectl claims why KIND/NAME`
// and `kubectl claims release KEY --holder-uid UID`. Install it on PATH
// (make build, or go install . in this directory) and kubectl finds it.
// See docs/operations.md.
//
// It is a module of its own, so that programs importing the ocf-claim
// library do not pull cobra and cli-runtime; it builds against the library
// of the same checkout (the replace directive of its go.mod).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ocf-claim/claim/cmd/kubectl-claims/internal/claimsctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	cmd := claimsctl.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, nil)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", claimsctl.ErrorText(err))
		os.Exit(1)
	}
}
