package natsbus

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// Users is the embedded server's users file: the router processes (other
// nodes of the DC, relays), which may do anything, and the engines, each
// of which may publish only on its own subjects (kvrpb.EnginePublish) and
// subscribe only to its own snapshot requests and the discovery requests
// (kvrpb.EngineSubscribe). An engine's identity is thus its credentials:
// it cannot register, heartbeat, deregister or publish KV events as
// another engine.
//
// In YAML:
//
//	routers:
//	  - user: node2
//	    password: "$2a$11$…"   # a bcrypt hash (recommended) or the password
//	  - nkey: UDXU4RCS…        # a user nkey's public key
//	engines:
//	  - id: 7
//	    nkey: UABC…
//	  - id: 8
//	    user: engine-8
//	    password: "$2a$11$…"
type Users struct {
	Routers []Identity `yaml:"routers"`
	Engines []Engine   `yaml:"engines"`
}

// Identity is one client's credentials: a user nkey's public key, or a
// user name and a password (plain or a bcrypt hash).
type Identity struct {
	NKey     string `yaml:"nkey"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// Engine is one engine's id and credentials.
type Engine struct {
	ID       uint64 `yaml:"id"`
	Identity `yaml:",inline"`
}

// LoadUsers reads and validates a users file. Errors name the file and
// the entry, never a password.
func LoadUsers(path string) (*Users, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: nats_users: %v", ErrConfig, err)
	}
	var u Users
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&u); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: nats_users %s: %v", ErrConfig, path, err)
	}
	if err := u.Validate(); err != nil {
		return nil, fmt.Errorf("%w: nats_users %s: %w", ErrConfig, path, err)
	}
	return &u, nil
}

// errUsers is wrapped by every problem of a users file.
var errUsers = errors.New("invalid users file")

// Validate checks every entry: exactly one kind of credential each, valid
// public user nkeys, unique names, keys and engine ids.
func (u *Users) Validate() error {
	seen := map[string]bool{}
	ids := map[uint64]bool{}
	for i, r := range u.Routers {
		if err := r.validate(seen); err != nil {
			return fmt.Errorf("%w: routers[%d]: %w", errUsers, i, err)
		}
	}
	for i, e := range u.Engines {
		if e.ID == 0 || ids[e.ID] {
			return fmt.Errorf("%w: engines[%d]: id %d is zero or repeated", errUsers, i, e.ID)
		}
		ids[e.ID] = true
		if err := e.validate(seen); err != nil {
			return fmt.Errorf("%w: engines[%d] (id %d): %w", errUsers, i, e.ID, err)
		}
	}
	return nil
}

func (c Identity) validate(seen map[string]bool) error {
	name := c.NKey
	switch {
	case (c.NKey == "") == (c.User == ""):
		return errors.New("set either nkey or user (with password)")
	case c.NKey != "" && (c.Password != "" || !nkeys.IsValidPublicUserKey(c.NKey)):
		return errors.New("nkey must be a user nkey's public key (U…), without password")
	case c.User != "" && c.Password == "":
		return errors.New("user needs a password")
	case c.User != "":
		name = "user " + c.User
	}
	if seen[name] {
		return fmt.Errorf("%s appears twice", name)
	}
	seen[name] = true
	return nil
}

// engineAllowResponses lets an engine answer the snapshot requests it
// receives (one reply each, to the requester's inbox) without any other
// publish right on inboxes.
var engineAllowResponses = &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}

// enginePermissions confines engine id of dc to its own subjects.
func enginePermissions(dc string, id uint64) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: kvrpb.EnginePublish(dc, id)},
		Subscribe: &server.SubjectPermission{Allow: kvrpb.EngineSubscribe(dc, id)},
		Response:  engineAllowResponses,
	}
}

// apply installs the users on the server's options for dc, plus the
// process's own user (full rights) whose password it returns: a random
// one per start, known to nothing outside the process.
func (u *Users) apply(opts *server.Options, dc string) (user, password string, err error) {
	add := func(c Identity, p *server.Permissions) {
		if c.NKey != "" {
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: c.NKey, Permissions: p})
			return
		}
		opts.Users = append(opts.Users, &server.User{Username: c.User, Password: c.Password, Permissions: p})
	}
	for _, r := range u.Routers {
		add(r, nil)
	}
	for _, e := range u.Engines {
		add(e.Identity, enginePermissions(dc, e.ID))
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("natsbus: generating the process's own password: %w", err)
	}
	user, password = "kvrouter-self-"+hex.EncodeToString(secret[:4]), hex.EncodeToString(secret)
	opts.Users = append(opts.Users, &server.User{Username: user, Password: password})
	return user, password, nil
}
