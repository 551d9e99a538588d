package vllmevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zeromq/zmq4"
)

// discardLogger silences zmq4's own logger; the subscriber logs what
// matters with slog.
var discardLogger = log.New(io.Discard, "", 0)

// errIdle ends a connection that stayed silent for IdleTimeout.
var errIdle = errors.New("vllmevents: no message within the idle timeout")

// Run follows the publisher until ctx is done: it resyncs the worker
// (the engine's cache predates the subscriber: a clear, then everything
// the engine buffered), then applies live batches, catching up after
// each reconnection. A connection that fails or stays silent for
// IdleTimeout is replaced after Retry. It returns nil when ctx ends, and
// an error only if called twice.
func (s *Subscriber) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("vllmevents: subscriber already running")
	}
	s.reset(ResyncStart)
	cause := causeStart
	for ctx.Err() == nil {
		if err := s.session(ctx, cause); err != nil && ctx.Err() == nil {
			s.log.Info("kv event connection ended", "err", err)
		}
		cause = causeReconnect
		t := time.NewTimer(s.cfg.Retry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// received is one result of the socket's Recv.
type received struct {
	msg zmq4.Msg
	err error
}

// session runs one connection: subscribe, replay from the next expected
// batch, then read live batches until an error or IdleTimeout of silence.
func (s *Subscriber) session(ctx context.Context, cause string) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := zmq4.NewSub(sctx, zmq4.WithDialerRetry(s.cfg.Retry), zmq4.WithDialerMaxRetries(-1),
		zmq4.WithLogger(discardLogger))
	if err := sub.SetOption(zmq4.OptionSubscribe, s.cfg.Topic); err != nil {
		_ = sub.Close()
		return err
	}
	if err := sub.Dial(s.cfg.Endpoint); err != nil {
		_ = sub.Close()
		return fmt.Errorf("dial %s: %w", s.cfg.Endpoint, err)
	}
	s.n.connects.Add(1)
	s.m.sessions.Inc()
	msgs := make(chan received)
	stop := make(chan struct{})
	done := make(chan struct{})
	go receive(sub, msgs, stop, done)
	defer func() { close(stop); cancel(); _ = sub.Close(); <-done }()
	s.resume(ctx, cause)
	return s.read(ctx, msgs)
}

// receive forwards the socket's messages until Recv fails or stop closes;
// it closes done when it returns.
func receive(sub zmq4.Socket, msgs chan<- received, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		msg, err := sub.Recv()
		select {
		case msgs <- received{msg, err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// read applies live messages until the connection fails, stays idle or
// ctx ends; with a GatedSink it looks at the gate every gateCheck.
func (s *Subscriber) read(ctx context.Context, msgs <-chan received) error {
	idle := time.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
	var gate <-chan time.Time
	if s.gate != nil {
		t := time.NewTicker(gateCheck)
		defer t.Stop()
		gate = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle.C:
			return errIdle
		case <-gate:
			s.checkGate(ctx)
		case r := <-msgs:
			if r.err != nil {
				return r.err
			}
			s.handleMessage(ctx, r.msg.Frames)
			idle.Reset(s.cfg.IdleTimeout)
		}
	}
}
