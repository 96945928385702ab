package meta

import (
	"context"
	"log/slog"
	"sort"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a zap logger for etcd (server or client) that forwards
// records at warn level and above to lg, or a no-op logger when lg is nil.
// etcd logs a great deal at info level (every raft step, every compaction);
// warnings (slow applies, failing endpoints, lost leader) are what an operator
// of Strata needs to see.
func newZapLogger(lg *slog.Logger, component string) *zap.Logger {
	return newQuietableZapLogger(lg, component, nil)
}

// newQuietableZapLogger is newZapLogger whose records are demoted to debug
// level once quiet is set: an embedded etcd that is being closed logs its
// listeners' shutdown as errors, which are expected then and only alarm an
// operator.
func newQuietableZapLogger(lg *slog.Logger, component string, quiet *atomic.Bool) *zap.Logger {
	if lg == nil {
		return zap.NewNop()
	}
	core := &slogCore{
		h:     lg.Handler(),
		min:   zapcore.WarnLevel,
		attrs: []slog.Attr{slog.String("component", component)},
		quiet: quiet,
	}
	return zap.New(core)
}

// slogCore is a zapcore.Core that writes into a slog.Handler.
type slogCore struct {
	h     slog.Handler
	min   zapcore.Level
	attrs []slog.Attr
	quiet *atomic.Bool // nil: never quiet
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l >= c.min && c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	attrs := make([]slog.Attr, 0, len(c.attrs)+len(fields))
	attrs = append(attrs, c.attrs...)
	attrs = append(attrs, fieldAttrs(fields)...)
	return &slogCore{h: c.h, min: c.min, attrs: attrs, quiet: c.quiet}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slogLevel(e.Level)
	if c.quiet != nil && c.quiet.Load() {
		level = slog.LevelDebug
		if !c.h.Enabled(context.Background(), level) {
			return nil
		}
	}
	r := slog.NewRecord(e.Time, level, e.Message, 0)
	r.AddAttrs(c.attrs...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(fieldAttrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l < zapcore.InfoLevel:
		return slog.LevelDebug
	case l < zapcore.WarnLevel:
		return slog.LevelInfo
	case l < zapcore.ErrorLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// fieldAttrs converts zap fields through zap's own map encoder, so every
// field type (errors, durations, nested objects) gets zap's rendering.
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}
