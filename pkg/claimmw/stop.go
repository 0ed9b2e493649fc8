package claimmw

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
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

// outsidePass returns ctx with the logger for what the middleware does
// outside a pass (its start, its event handlers), with the value
// "middleware": the logger ctx carries (a manager's Options.BaseContext
// may give one), else the manager's. A manager runs both with a context
// that carries no logger by default, and what they log would otherwise go
// to controller-runtime's global logger, which an operator that set only
// the manager's Options.Logger never sees.
func (m *Middleware) outsidePass(ctx context.Context) context.Context {
	l, err := logr.FromContext(ctx)
	if err != nil {
		if m.cfg.manager == nil {
			return ctx
		}
		l = m.cfg.manager.GetLogger()
	}
	return logr.NewContext(ctx, l.WithValues("middleware", m.cfg.name))
}
