package gateway

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/relay/producer"
	"github.com/kvrouter/kvrouter/tokenize"
)

// Limits and defaults of the gateway's own. Each is the default of the
// matching Config field; the comment says why the value is what it is.
// The edge limits a router node shares (body and prompt size, header,
// body, idle and stream write timeouts) are oaiedge's.
const (
	// MaxDCNameBytes caps a DC name in the forwarding header.
	MaxDCNameBytes = 256
	// DefaultBlockSize is the KV block size of models without a Pool
	// entry: 64 tokens, the block size most engines are configured with.
	DefaultBlockSize = 64
	// DefaultHealthInterval is how often each router node's /ready is
	// polled: a dead node stops receiving new requests within a second,
	// and connection-refused retries cover the gap.
	DefaultHealthInterval = time.Second
	// DialTimeout bounds connecting to a router node or a remote gateway;
	// a connection that takes longer is treated as refused.
	DialTimeout = 5 * time.Second
	// ControlTimeout bounds the small control calls (readiness, model
	// lists, session lookups); they answer from memory on the far side.
	ControlTimeout = 2 * time.Second
)

// Remote is another DC's gateway.
type Remote struct {
	// DC is the remote DC's name, as its lanes' producer.PoolID.DC.
	DC string
	// URL is the remote gateway's base URL (scheme://host:port).
	URL string
	// Alternates are the base URLs of the DC's other gateways, when its
	// relays are listed one by one rather than behind one Service URL
	// (see remotes.go): tried in turn when one refuses the connection.
	Alternates []string
	// WANRTT is the configured round trip to that DC, the wan_rtt_ms(dc)
	// term of the decision formula.
	WANRTT time.Duration
}

// Pool names the block hashing of one model's engines in every DC.
type Pool struct {
	Model string
	// BlockSize is the KV block size in tokens.
	BlockSize int
}

// Config configures a Gateway. Zero fields take the defaults above.
type Config struct {
	// DC is this gateway's DC name.
	DC string
	// Nodes are the base URLs of the local DC's router nodes.
	Nodes []string
	// Remotes are the other DCs' gateways. Every gateway of a federation
	// must be given the same set of DC names, because new sessions are
	// homed by a hash over them (doc.go, Sessions).
	Remotes []Remote
	// Tokenizers gives models their tokenizer, so that text prompts are
	// hashed into the token blocks the engines cache (tokenize.
	// EncodeRequest); a text prompt of a model without one has no blocks
	// and is served locally.
	Tokenizers map[string]*tokenize.Tokenizer
	// Pools gives each model's block size; DefaultBlockSize otherwise.
	Pools            []Pool
	DefaultBlockSize int
	// Policy is the DC decision policy.
	Policy Policy
	// SessionFallback lets a session request whose owning DC is
	// unreachable be served locally. Off by default: serving it here
	// would make a second DC serve the session, which the gateway
	// otherwise never does; the client gets a 503 and retries.
	SessionFallback bool

	// LocalIndex answers exact local prefix depths; nil counts 0.
	LocalIndex LocalIndex
	// RemoteIndex answers remote prefix depths; nil means no lanes.
	RemoteIndex RemoteIndex
	// Sessions locates sessions bound in other DCs; nil means sessions
	// are placed by their hash home only.
	Sessions SessionLocator
	// LocalLoad, if set, is the local DC's load for the load penalty.
	LocalLoad func() producer.Load

	MaxBodyBytes    int64
	MaxPromptTokens int
	HealthInterval  time.Duration
	// Transport carries requests to nodes and remote gateways; nil builds
	// one with DialTimeout and compression off (bytes pass through as the
	// upstream wrote them).
	Transport http.RoundTripper
	// Now is the clock for deadlines, staleness and latency. Required.
	Now func() time.Time
	Log *slog.Logger

	// Edge is who may call the gateway and how sessions are named.
	Edge EdgeConfig
	// MetricLabels are constant labels on every series of the gateway's
	// metrics (a relay sets dc and relay).
	MetricLabels prometheus.Labels
	// TracerProvider supplies the gateway's spans (tracing.go); nil means
	// none, and the incoming trace context is then passed on unchanged.
	TracerProvider trace.TracerProvider
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	c.DefaultBlockSize = cmp.Or(c.DefaultBlockSize, DefaultBlockSize)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, oaiedge.MaxBodyBytes)
	c.MaxPromptTokens = cmp.Or(c.MaxPromptTokens, oaiedge.MaxPromptTokens)
	c.HealthInterval = cmp.Or(c.HealthInterval, DefaultHealthInterval)
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Policy.EnsureDefaults()
}

// Validate reports the first invalid field, wrapped in ErrConfig.
func (c *Config) Validate() error {
	switch {
	case c.Now == nil:
		return fmt.Errorf("%w: no clock", ErrConfig)
	case !validDC(c.DC):
		return fmt.Errorf("%w: dc %q", ErrConfig, c.DC)
	case len(c.Nodes) == 0:
		return fmt.Errorf("%w: no router nodes", ErrConfig)
	case c.DefaultBlockSize <= 0 || c.MaxBodyBytes <= 0 || c.MaxPromptTokens <= 0 || c.HealthInterval <= 0:
		return fmt.Errorf("%w: limits must be positive", ErrConfig)
	}
	for _, u := range c.Nodes {
		if err := validURL(u); err != nil {
			return err
		}
	}
	if err := c.validateRemotes(); err != nil {
		return err
	}
	for _, p := range c.Pools {
		if p.Model == "" || p.BlockSize <= 0 {
			return fmt.Errorf("%w: pool %q block size %d", ErrConfig, p.Model, p.BlockSize)
		}
	}
	return c.Policy.Validate()
}

// validateRemotes checks the remote gateways: valid, distinct DC names
// other than the local one, and URLs.
func (c *Config) validateRemotes() error {
	seen := map[string]bool{c.DC: true}
	for _, r := range c.Remotes {
		if !validDC(r.DC) || seen[r.DC] || r.WANRTT < 0 {
			return fmt.Errorf("%w: remote dc %q (duplicate, invalid or negative rtt)", ErrConfig, r.DC)
		}
		seen[r.DC] = true
		for _, u := range r.gateways() {
			if err := validURL(u); err != nil {
				return err
			}
		}
	}
	return nil
}

// validDC reports a usable DC name: non-empty, bounded, and printable
// ASCII, since it travels in a header.
func validDC(dc string) bool {
	return dc != "" && len(dc) <= MaxDCNameBytes && oaiedge.Visible(dc)
}

// validURL checks a base URL.
func validURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: url %q", ErrConfig, s)
	}
	return nil
}

// trimBase removes a trailing slash from a base URL.
func trimBase(u string) string { return strings.TrimRight(u, "/") }
