package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// logWriter turns the line logs of hashicorp/raft (hclog) and memberlist
// (log.Logger), which both mark levels as "[INFO]", into slog records, so
// the node logs through one slog.Logger without importing hclog.
type logWriter struct {
	log       *slog.Logger
	component string
}

var logLevels = []struct {
	tag   string
	level slog.Level
}{
	{"[TRACE]", slog.LevelDebug - 4}, {"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
}

func (w logWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		level, msg := slog.LevelInfo, s
		for _, l := range logLevels {
			if i := strings.Index(s, l.tag); i >= 0 {
				level, msg = l.level, strings.TrimSpace(s[i+len(l.tag):])
				break
			}
		}
		if w.log.Enabled(context.Background(), level) {
			w.log.Log(context.Background(), level, msg, "component", w.component)
		}
	}
	return len(p), nil
}

// hclogLevel is the level name raft filters at, from the slog logger's.
func hclogLevel(l *slog.Logger) string {
	ctx := context.Background()
	switch {
	case l.Enabled(ctx, slog.LevelDebug):
		return "DEBUG"
	case l.Enabled(ctx, slog.LevelInfo):
		return "INFO"
	case l.Enabled(ctx, slog.LevelWarn):
		return "WARN"
	}
	return "ERROR"
}
