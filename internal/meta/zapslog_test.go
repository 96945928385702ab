package meta

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestZapToSlog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	z := newZapLogger(lg, "etcd").Named("raft").With(zap.String("member", "m1"))
	z.Info("chatty", zap.Int("n", 1))
	z.Warn("slow apply", zap.Duration("took", 1500000000), zap.Error(errors.New("disk")))
	z.Error("bad")
	out := buf.String()
	if strings.Contains(out, "chatty") {
		t.Errorf("info record forwarded: %s", out)
	}
	for _, want := range []string{`level=WARN msg="slow apply" component=etcd member=m1 logger=raft`, "took=1.5s", "error=disk", "level=ERROR msg=bad"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	newZapLogger(nil, "x").Error("discarded") // no-op logger, no panic
}
