package claimmw

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// stopping reports whether err is only the end of ctx: the manager stopping
// (its context cancelled) fails every request in flight, and that is no
// fault to report or retry.
func stopping(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled)
}

// logError logs err as an error, unless it is only ctx ending: a clean
// manager stop then leaves a debug line, not an ERROR with a stack trace.
func logError(ctx context.Context, err error, msg string, keysAndValues ...any) {
	if stopping(ctx, err) {
		log.FromContext(ctx).V(1).Info(msg+" (stopping)", append(keysAndValues, "error", err.Error())...)
		return
	}
	log.FromContext(ctx).Error(err, msg, keysAndValues...)
}
