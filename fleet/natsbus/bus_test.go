package natsbus

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestEmbeddedRoundTrip(t *testing.T) {
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) })
	var states []bool
	b, err := Open(Config{EmbeddedAddr: "127.0.0.1:0", OnConnected: func(up bool) { states = append(states, up) }}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, err := nats.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sub, err := b.Conn.SubscribeSync("kvr.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := other.Publish("kvr.test", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil || string(msg.Data) != "hi" {
		t.Fatalf("got %v, %v", msg, err)
	}
	if len(states) != 1 || !states[0] {
		t.Fatalf("connection states %v", states)
	}
	other.Close()
	b.Close()
	b.Close() // idempotent
}

func TestConfigErrorsNameTheOption(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bad url", Config{URL: "http://x"}},
		{"bad listen", Config{EmbeddedAddr: "nohostport"}},
		{"bad port", Config{EmbeddedAddr: "127.0.0.1:99999"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if err := (Config{URL: "nats://127.0.0.1:4222,nats://127.0.0.1:4223"}).Validate(); err != nil {
		t.Fatal(err)
	}
}
