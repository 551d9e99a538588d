package natsbus

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/time/rate"
)

// Violation kinds the embedded server reports through Config.OnViolation.
const (
	ViolationAuthentication = "authentication"
	ViolationPublish        = "publish"
	ViolationSubscribe      = "subscribe"
)

// violationLogEvery is the least time between two warnings about refused
// clients; OnViolation hears of every one.
const violationLogEvery = 10 * time.Second

// serverLog is the embedded server's logger. The server reports refused
// clients only in its log, so this is where they are recognised, counted
// and (throttled) logged; the rest of the server's log goes to slog at
// debug level. nats-server redacts passwords from what it logs, and the
// lines used here carry a client address, a user name or nkey public key
// and a subject at most.
type serverLog struct {
	log  *slog.Logger
	on   func(kind string)
	warn rate.Sometimes
}

var _ server.Logger = (*serverLog)(nil)

func newServerLog(log *slog.Logger, on func(string)) *serverLog {
	return &serverLog{log: log, on: on, warn: rate.Sometimes{Interval: violationLogEvery}}
}

// classify names the violation a server error line reports, or "".
func classify(line string) string {
	switch {
	case strings.Contains(line, "Publish Violation"):
		return ViolationPublish
	case strings.Contains(line, "Subscription Violation"):
		return ViolationSubscribe
	case strings.Contains(line, server.ErrAuthentication.Error()):
		return ViolationAuthentication
	}
	return ""
}

func (l *serverLog) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	kind := classify(line)
	if kind == "" {
		l.log.Debug("embedded NATS server", "msg", line)
		return
	}
	if l.on != nil {
		l.on(kind)
	}
	l.warn.Do(func() {
		l.log.Warn("embedded NATS server refused a client (see kvrouter_nats_violations_total)", "kind", kind, "detail", line)
	})
}

func (l *serverLog) Warnf(format string, v ...any) {
	l.log.Debug("embedded NATS server", "msg", fmt.Sprintf(format, v...))
}

func (l *serverLog) Fatalf(format string, v ...any) {
	l.log.Error("embedded NATS server", "msg", fmt.Sprintf(format, v...))
}

func (l *serverLog) Noticef(string, ...any) {}
func (l *serverLog) Debugf(string, ...any)  {}
func (l *serverLog) Tracef(string, ...any)  {}
