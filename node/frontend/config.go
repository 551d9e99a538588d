package frontend

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/kvrouter/kvrouter/tokenize"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("frontend: invalid config")

// Config configures a Server. The zero value of every field means its
// default (see limits.go and oaiedge's limits for the reasons behind each
// default).
type Config struct {
	// DC is the data center the node serves, reported by GET
	// /v1/sessions/{id}.
	DC string
	// Serving, when set, gates the routed endpoints: while it reports
	// false they answer 503 not_ready without reading the body (a
	// cluster member that has not caught up). It is called per request
	// and must be cheap.
	Serving func() bool
	// MaxBodyBytes caps request bodies; larger bodies get 413.
	MaxBodyBytes int64
	// MaxPromptTokens caps prompts (token ids, or text at TextBytesPerToken
	// bytes per token); longer prompts get 400.
	MaxPromptTokens int

	// ReadHeaderTimeout bounds reading the request line and headers.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds reading the request body.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds writing a non-streaming response.
	WriteTimeout time.Duration
	// StreamWriteTimeout is the per-write deadline of streamed responses,
	// extended after each successful write.
	StreamWriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful drain in Serve.
	ShutdownTimeout time.Duration
	// UpstreamDialTimeout and UpstreamHeaderTimeout bound the engine
	// connection and the wait for its response headers.
	UpstreamDialTimeout   time.Duration
	UpstreamHeaderTimeout time.Duration

	// EngineAPIKey, when set, goes to every engine as "Authorization:
	// Bearer <key>": the key an engine started with --api-key (vLLM,
	// SGLang) requires. One key serves the fleet. Clients' own
	// credentials are never passed on, and the key is never logged.
	EngineAPIKey string
	// Admin configures the operator API (busy_threshold.go); off by
	// default.
	Admin AdminConfig
	// Tokenizers gives, per model name, the tokenizer whose ids the
	// engine computes, so that text prompts are routed by the engine's own
	// token blocks (exactTokens); models without one are routed by text.
	Tokenizers map[string]*tokenize.Tokenizer
	// EngineRootCAs verifies engines served over https; nil means the
	// system's roots.
	EngineRootCAs *x509.CertPool
	// EngineCleartextHTTP2 speaks HTTP/2 to http:// engines by prior
	// knowledge (h2c), and then HTTP/2 only; off, http:// engines get
	// HTTP/1.1. https engines use HTTP/2 whenever they offer it by ALPN.
	EngineCleartextHTTP2 bool
	// EngineProxy, when set, chooses the proxy of each engine request, as
	// http.Transport.Proxy; nil connects to engines directly, whatever
	// HTTP_PROXY says, since engines are inside the deployment.
	EngineProxy func(*http.Request) (*url.URL, error)

	// OverloadStatus is the HTTP status for dispatch.ErrOverloaded (529 by
	// default; 429 and 503 are common alternatives).
	OverloadStatus int

	// Ready reports readiness for GET /ready. Nil means "the router lists at
	// least one model", i.e. at least one live engine.
	Ready func() bool
	// Now is the clock for latency measurements and deadlines; nil means
	// time.Now. Tests inject a fake to make latencies deterministic.
	Now func() time.Time
	// NewRequestID generates request ids for requests without a usable
	// X-Request-Id; nil means a node-unique prefix plus a counter.
	NewRequestID func() string
	// TracerProvider supplies the request spans' tracer; nil means
	// otel.GetTracerProvider(), which exports wherever OTLP was configured.
	TracerProvider trace.TracerProvider
	// Transport carries requests to engines; nil means a transport built
	// from the upstream timeouts, owned and closed by the Server.
	Transport http.RoundTripper

	// Edge is who may call the frontend and how sessions are named.
	Edge EdgeConfig

	// NoProxy turns the OpenAI routes off (kvrouter node --no-frontend):
	// the listener serves health, readiness, the admin and metrics routes
	// and Routes only.
	NoProxy bool
	// Routes are routes of the node's other edges served on this listener
	// behind its access control and timeouts: the selection API's
	// HTTP/JSON mirror.
	Routes []oaiedge.Route
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, oaiedge.MaxBodyBytes)
	c.MaxPromptTokens = cmp.Or(c.MaxPromptTokens, oaiedge.MaxPromptTokens)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, oaiedge.ReadHeaderTimeout)
	c.BodyReadTimeout = cmp.Or(c.BodyReadTimeout, oaiedge.BodyReadTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeout)
	c.StreamWriteTimeout = cmp.Or(c.StreamWriteTimeout, oaiedge.StreamWriteTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, oaiedge.IdleTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, ShutdownTimeout)
	c.UpstreamDialTimeout = cmp.Or(c.UpstreamDialTimeout, UpstreamDialTimeout)
	c.UpstreamHeaderTimeout = cmp.Or(c.UpstreamHeaderTimeout, UpstreamHeaderTimeout)
	c.OverloadStatus = cmp.Or(c.OverloadStatus, OverloadStatus)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("%w: MaxBodyBytes %d is negative", ErrConfig, c.MaxBodyBytes)
	case c.MaxPromptTokens < 0:
		return fmt.Errorf("%w: MaxPromptTokens %d is negative", ErrConfig, c.MaxPromptTokens)
	case c.OverloadStatus < 400 || c.OverloadStatus > 599:
		return fmt.Errorf("%w: OverloadStatus %d is not an error status", ErrConfig, c.OverloadStatus)
	case !ValidEngineAPIKey(c.EngineAPIKey):
		// The key itself stays out of the message, which may be logged.
		return fmt.Errorf("%w: EngineAPIKey holds a space or a control character", ErrConfig)
	}
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": c.ReadHeaderTimeout, "BodyReadTimeout": c.BodyReadTimeout,
		"WriteTimeout": c.WriteTimeout, "StreamWriteTimeout": c.StreamWriteTimeout,
		"IdleTimeout": c.IdleTimeout, "ShutdownTimeout": c.ShutdownTimeout,
		"UpstreamDialTimeout": c.UpstreamDialTimeout, "UpstreamHeaderTimeout": c.UpstreamHeaderTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrConfig, name, d)
		}
	}
	return nil
}

// ValidEngineAPIKey reports whether key can be sent as a bearer token
// (oaiedge.Visible).
func ValidEngineAPIKey(key string) bool { return oaiedge.Visible(key) }
