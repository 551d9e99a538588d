package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// TestComposeNATSConfinesEngines loads each DC's NATS configuration of the
// compose trial with the NATS server's own parser, and checks that every
// kvrouter service connects with a certificate its server maps to a user,
// the router node and the relay with every right, and each engine with
// exactly the rights the router grants an engine of its id and DC
// (kvrpb.EnginePublish, kvrpb.EngineSubscribe, one response per request):
// an engine can speak for no other.
func TestComposeNATSConfinesEngines(t *testing.T) {
	services := composeServices(t)
	ca := newTestCA(t)
	for _, dc := range []string{"dc1", "dc2"} {
		t.Run(dc, func(t *testing.T) {
			users := loadComposeNATS(t, ca, dc)
			n := 0
			for name, s := range services {
				if s.Image != "kvrouter" || s.Environment["KVR_DC"] != dc {
					continue
				}
				n++
				env := s.Environment
				if env["KVR_NATS"] != "tls://nats-"+dc+":4222" {
					t.Errorf("%s: KVR_NATS %q is not its DC's NATS over TLS", name, env["KVR_NATS"])
				}
				user := strings.TrimSuffix(strings.TrimPrefix(env["KVR_NATS_TLS_CERT"], "/certs/"), ".crt")
				u, ok := users[user]
				if !ok {
					t.Errorf("%s: its NATS certificate %s maps to no user of nats-%s.conf", name, env["KVR_NATS_TLS_CERT"], dc)
					continue
				}
				if s.Command[0] != "mocker" {
					if u.Permissions != nil {
						t.Errorf("%s: router user %s is restricted: %+v", name, user, u.Permissions)
					}
					continue
				}
				id, err := strconv.ParseUint(env["KVR_ENGINE_ID"], 10, 64)
				if err != nil || id == 0 {
					t.Errorf("%s: KVR_ENGINE_ID %q: an engine confined to its subjects needs its id", name, env["KVR_ENGINE_ID"])
					continue
				}
				checkEngineUser(t, name, u, dc, id)
			}
			if n != 4 {
				t.Errorf("%d kvrouter services in %s, want node, relay and two engines", n, dc)
			}
		})
	}
}

// checkEngineUser compares an engine user's permissions with the router's
// rule for engine id of dc.
func checkEngineUser(t *testing.T, name string, u *natsserver.User, dc string, id uint64) {
	t.Helper()
	p := u.Permissions
	switch {
	case p == nil || p.Publish == nil || p.Subscribe == nil || p.Response == nil:
		t.Errorf("%s: engine user %s is not confined: %+v", name, u.Username, p)
	case !sameSet(p.Publish.Allow, kvrpb.EnginePublish(dc, id)) || len(p.Publish.Deny) > 0:
		t.Errorf("%s: publish %v, want %v", name, p.Publish.Allow, kvrpb.EnginePublish(dc, id))
	case !sameSet(p.Subscribe.Allow, kvrpb.EngineSubscribe(dc, id)) || len(p.Subscribe.Deny) > 0:
		t.Errorf("%s: subscribe %v, want %v", name, p.Subscribe.Allow, kvrpb.EngineSubscribe(dc, id))
	case p.Response.MaxMsgs != 1:
		t.Errorf("%s: %d responses per request, want 1", name, p.Response.MaxMsgs)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// loadComposeNATS parses compose/nats-<dc>.conf as the server would, its
// /certs files issued by the test CA, and returns its users by name.
func loadComposeNATS(t *testing.T, ca *testCA, dc string) map[string]*natsserver.User {
	t.Helper()
	dir := t.TempDir()
	ca.issue(t, dir, certNames{dns: []string{"nats-dc1", "nats-dc2"}, usages: usagesOf(t, []string{"server auth"})},
		files{cert: "nats.crt", key: "nats.key", ca: "ca.crt"})
	conf, err := os.ReadFile(filepath.Join("compose", "nats-"+dc+".conf"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nats.conf")
	writeFile(t, path, []byte(strings.ReplaceAll(string(conf), "/certs/", dir+"/")))
	opts, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-%s.conf: %v", dc, err)
	}
	if opts.TLSConfig == nil || !opts.TLSMap {
		t.Fatalf("nats-%s.conf: want TLS with verify_and_map", dc)
	}
	users := map[string]*natsserver.User{}
	for _, u := range opts.Users {
		if u.Password != "" {
			t.Errorf("nats-%s.conf: user %s has a password; the trial maps certificates", dc, u.Username)
		}
		users[u.Username] = u
	}
	if len(users) == 0 {
		t.Fatal(fmt.Sprintf("nats-%s.conf: no users", dc))
	}
	return users
}
