package body

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LogFormat picks the handler: "json", "text", or "auto" (JSON when the
// process runs under systemd, which sets JOURNAL_STREAM, text otherwise).
func LogFormat(format string, getenv func(string) string) string {
	if format != "auto" && format != "" {
		return format
	}
	if getenv("JOURNAL_STREAM") != "" {
		return "json"
	}
	return "text"
}

// NewLogger returns the body's logger writing to w.
func NewLogger(w io.Writer, format string, level slog.Leveler, getenv func(string) string) *slog.Logger {
	if LogFormat(format, getenv) == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(&textHandler{w: w, level: level, mu: new(sync.Mutex)})
}

// textHandler writes one short line a record for people at a terminal:
//
//	14:03:07.412 INFO  body started board=sim channels=14
type textHandler struct {
	w      io.Writer
	level  slog.Leveler
	mu     *sync.Mutex
	prefix string // group names, "a.b."
	attrs  []byte // pre-rendered attrs from WithAttrs
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *textHandler) Handle(_ context.Context, r slog.Record) error {
	b := make([]byte, 0, 128)
	if !r.Time.IsZero() {
		b = r.Time.AppendFormat(b, "15:04:05.000 ")
	}
	lv := r.Level.String()
	b = append(b, lv...)
	b = append(b, strings.Repeat(" ", max(1, 6-len(lv)))...)
	b = append(b, r.Message...)
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, h.prefix, a)
		return true
	})
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append([]byte(nil), h.attrs...)
	for _, a := range as {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return &n
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.prefix = h.prefix + name + "."
	return &n
}

func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			b = appendAttr(b, p, g)
		}
		return b
	}
	b = append(b, ' ')
	b = append(b, prefix...)
	b = append(b, a.Key...)
	b = append(b, '=')
	var s string
	switch a.Value.Kind() {
	case slog.KindTime:
		s = a.Value.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(a.Value.Any())
		}
	default:
		s = a.Value.String()
	}
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		s = strconv.Quote(s)
	}
	return append(b, s...)
}
