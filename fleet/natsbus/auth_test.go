package natsbus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"

	"github.com/kvrouter/kvrouter/internal/waittest"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// violations records what the embedded server reports.
type violations struct {
	mu   sync.Mutex
	seen map[string]int
}

func (v *violations) add(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]int{}
	}
	v.seen[kind]++
}

func (v *violations) count(kind string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[kind]
}

// userSeed makes a user nkey and writes its seed to a file.
func userSeed(t *testing.T) (pub, seedFile string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ = kp.PublicKey()
	seedFile = filepath.Join(t.TempDir(), "engine.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, seedFile
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The embedded server with a users file refuses clients without
// credentials, confines each engine to its own subjects, gives routers
// every right, and reports each refusal.
func TestEmbeddedUsersConfineEngines(t *testing.T) {
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ign) })
	pub7, seed7 := userSeed(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("router-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := writeFile(t, "users.yaml", fmt.Sprintf(`
routers:
  - user: relay
    password: %q
engines:
  - id: 7
    nkey: %s
  - id: 8
    user: engine-8
    password: pw8
`, hash, pub7))
	var v violations
	b, err := Open(Config{EmbeddedAddr: "127.0.0.1:0", DC: "dc1", Server: ServerSecurity{UsersFile: users}, OnViolation: v.add}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sub, err := b.Conn.SubscribeSync("kvr.dc1.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Conn.Flush()

	if nc, err := nats.Connect(b.URL()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	waitFor(t, "authentication violation", func() bool { return v.count(ViolationAuthentication) == 1 })

	e7 := dial(t, b.URL(), ClientAuth{NKeySeedFile: seed7})
	if err := e7.Publish(kvrpb.SubjectRegister("dc1", 7), []byte("own")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "own" {
		t.Fatalf("engine 7 on its own subject: %v %v", msg, err)
	}
	_ = e7.Publish(kvrpb.SubjectRegister("dc1", 8), []byte("forged"))
	_ = e7.Publish(kvrpb.SubjectKV("dc1", 8, 0), []byte("forged"))
	waitFor(t, "publish violations", func() bool { return v.count(ViolationPublish) == 2 })
	if _, err := e7.SubscribeSync(kvrpb.SubjectKVAll("dc1")); err == nil {
		_ = e7.Flush()
	}
	waitFor(t, "subscribe violation", func() bool { return v.count(ViolationSubscribe) == 1 })
	// The server delivers one client's messages in order: a forged one
	// that went through would arrive before this one.
	if err := e7.Publish(kvrpb.SubjectRegister("dc1", 7), []byte("own again")); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("engine 7's own message after the forged ones: %v", err)
	}
	if string(msg.Data) != "own again" {
		t.Fatalf("a forged message went through on %s", msg.Subject)
	}

	e8 := dial(t, b.URL(), ClientAuth{User: "engine-8", Password: "pw8"})
	if err := e8.Publish(kvrpb.SubjectHeartbeat("dc1", 8), []byte("hb")); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || msg.Subject != kvrpb.SubjectHeartbeat("dc1", 8) {
		t.Fatalf("engine 8 heartbeat: %v %v", msg, err)
	}
	relay := dial(t, b.URL(), ClientAuth{User: "relay", Password: "router-secret"})
	if err := relay.Publish(kvrpb.SubjectDiscover("dc1"), nil); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || msg.Subject != kvrpb.SubjectDiscover("dc1") {
		t.Fatalf("relay discover: %v %v", msg, err)
	}
	e7.Close()
	e8.Close()
	relay.Close()
}

// An engine answers the snapshot requests of its own subject, a one-off
// response to the router's inbox.
func TestEmbeddedEngineAnswersItsSnapshots(t *testing.T) {
	pub7, seed7 := userSeed(t)
	users := writeFile(t, "users.yaml", "engines:\n  - id: 7\n    nkey: "+pub7+"\n")
	b, err := Open(Config{EmbeddedAddr: "127.0.0.1:0", DC: "dc1", Server: ServerSecurity{UsersFile: users}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e7 := dial(t, b.URL(), ClientAuth{NKeySeedFile: seed7})
	defer e7.Close()
	if _, err := e7.Subscribe(kvrpb.SubjectSnapshot("dc1", 7, 0), func(m *nats.Msg) { _ = m.Respond([]byte("snap")) }); err != nil {
		t.Fatal(err)
	}
	_ = e7.Flush()
	msg, err := b.Conn.Request(kvrpb.SubjectSnapshot("dc1", 7, 0), nil, 5*time.Second)
	if err != nil || string(msg.Data) != "snap" {
		t.Fatalf("snapshot: %v %v", msg, err)
	}
}

func dial(t *testing.T, url string, a ClientAuth) *nats.Conn {
	t.Helper()
	opts, err := a.options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.Until(t, 10*time.Second, what, cond)
}

func TestUsersFileErrors(t *testing.T) {
	pub, _ := userSeed(t)
	tests := []struct {
		name, body, want string
	}{
		{"unknown key", "engines:\n  - id: 1\n    nkey: " + pub + "\n    role: x\n", "role"},
		{"zero id", "engines:\n  - nkey: " + pub + "\n", "id 0"},
		{"repeated id", "engines:\n  - id: 1\n    user: a\n    password: p\n  - id: 1\n    user: b\n    password: p\n", "repeated"},
		{"both", "routers:\n  - nkey: " + pub + "\n    user: a\n    password: p\n", "either"},
		{"neither", "routers:\n  - password: p\n", "either"},
		{"seed instead of key", "routers:\n  - nkey: SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4\n", "public key"},
		{"no password", "routers:\n  - user: a\n", "password"},
		{"user twice", "routers:\n  - user: a\n    password: p\nengines:\n  - id: 2\n    user: a\n    password: q\n", "twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadUsers(writeFile(t, "u.yaml", tc.body))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
			if strings.Contains(fmt.Sprint(err), "SUAIB") {
				t.Fatal("the error quotes a seed")
			}
		})
	}
}

func TestClientAuthValidate(t *testing.T) {
	seed := writeFile(t, "s.nk", "x")
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"nkey", Config{URL: "nats://h:4222", Auth: ClientAuth{NKeySeedFile: seed}}, true},
		{"user", Config{URL: "nats://h:4222", Auth: ClientAuth{User: "u", Password: "p"}}, true},
		{"two methods", Config{URL: "nats://h:4222", Auth: ClientAuth{User: "u", Token: "t"}}, false},
		{"password alone", Config{URL: "nats://h:4222", Auth: ClientAuth{Password: "p"}}, false},
		{"cert without key", Config{URL: "tls://h:4222", Auth: ClientAuth{TLSCert: seed}}, false},
		{"missing file", Config{URL: "nats://h:4222", Auth: ClientAuth{CredsFile: "/nonexistent.creds"}}, false},
		{"client auth with embedded", Config{Auth: ClientAuth{User: "u", Password: "p"}}, false},
		{"users with external", Config{URL: "nats://h:4222", Server: ServerSecurity{UsersFile: seed}}, false},
		{"users without dc", Config{Server: ServerSecurity{UsersFile: seed}}, false},
		{"listen ca without cert", Config{DC: "d", Server: ServerSecurity{TLSCA: seed}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v", err)
			}
			if err != nil && (strings.Contains(err.Error(), "\"p\"") || strings.Contains(err.Error(), " p ")) {
				t.Fatalf("the error quotes a password: %v", err)
			}
		})
	}
}
