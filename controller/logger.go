package controller

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's log lines to a *slog.Logger. Raft's
// info chatter (heartbeats, elections) is logged at slog's Debug level so a
// broker's default Info log shows only warnings and errors from Raft.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

func newHclog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l, name: name}
}

func (h *hclogAdapter) slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug, hclog.Info:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lv := h.slogLevel(level)
	if !h.l.Enabled(context.Background(), lv) {
		return
	}
	all := make([]any, 0, len(h.args)+len(args)+2)
	all = append(all, "component", h.name)
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Log(context.Background(), lv, msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) IsTrace() bool                 { return false }
func (h *hclogAdapter) IsDebug() bool                 { return h.l.Enabled(context.Background(), slog.LevelDebug) }
func (h *hclogAdapter) IsInfo() bool                  { return h.IsDebug() }
func (h *hclogAdapter) IsWarn() bool                  { return h.l.Enabled(context.Background(), slog.LevelWarn) }
func (h *hclogAdapter) IsError() bool                 { return true }
func (h *hclogAdapter) ImpliedArgs() []any            { return h.args }
func (h *hclogAdapter) Name() string                  { return h.name }
func (h *hclogAdapter) SetLevel(hclog.Level)          {}
func (h *hclogAdapter) GetLevel() hclog.Level         { return hclog.Info }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: h.l, name: h.name, args: append(append([]any(nil), h.args...), args...)}
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	n := name
	if h.name != "" {
		n = h.name + "." + name
	}
	return &hclogAdapter{l: h.l, name: n, args: h.args}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l, name: name, args: h.args}
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{h}
}

// lineWriter turns a standard logger's lines ("[WARN] raft: ...") into
// records at the level their prefix names.
type lineWriter struct{ h *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := hclog.Info
	switch {
	case strings.HasPrefix(line, "[ERR"):
		level = hclog.Error
	case strings.HasPrefix(line, "[WARN"):
		level = hclog.Warn
	case strings.HasPrefix(line, "[DEBUG"), strings.HasPrefix(line, "[TRACE"):
		level = hclog.Debug
	}
	w.h.Log(level, line)
	return len(p), nil
}
