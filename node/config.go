package node

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/kvrouter/kvrouter/fleet"
	"github.com/kvrouter/kvrouter/fleet/declared"
	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/internal/telemetry"
	"github.com/kvrouter/kvrouter/node/dispatch"
	"github.com/kvrouter/kvrouter/node/frontend"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/tokenize"
)

// ErrConfig is returned for an invalid node configuration; the message names
// the option.
var ErrConfig = errors.New("node: invalid config")

// DefaultHTTPAddr is the client-facing address: loopback, so that a node
// started without options is not exposed beyond the machine.
const DefaultHTTPAddr = "127.0.0.1:8000"

// Config is a router node's whole configuration. Zero values mean defaults
// (see DefaultConfig); the command line maps one flag to each field.
type Config struct {
	// DC names the data center; it prefixes every NATS subject (kvr.<dc>).
	DC string
	// NodeID names this node in logs and metrics.
	NodeID string
	// HTTPAddr is the OpenAI-compatible frontend's listen address.
	HTTPAddr string
	// TLSCert and TLSKey (tls_cert, tls_key), PEM files, serve the
	// client-facing API over HTTPS; empty, it is plain HTTP (behind an
	// ingress that terminates TLS, or on a trusted network).
	TLSCert, TLSKey string
	// EngineTLSCA (engine_tls_ca) is a PEM file of the CA that signs the
	// certificates of engines served over https (endpoint URLs starting
	// with https://); empty, they are verified against the system's roots.
	EngineTLSCA string
	// NATS is natsbus.Embedded or a nats:// URL; NATSListen is where an
	// embedded server listens.
	NATS       string
	NATSListen string
	// NATSSecurity authenticates to NATS or secures the embedded server.
	NATSSecurity NATSSecurity
	// OTLPEndpoint (otlp_endpoint), when set, exports request spans to
	// this collector: host:port for OTLP/gRPC in cleartext, or an http://
	// or https:// URL (telemetry.ParseEndpoint). Empty leaves tracing to
	// the OTEL_* environment, and off without it.
	OTLPEndpoint string

	// Cluster makes the node a member of its DC's raft cluster; off while
	// Cluster.RaftAddr is empty.
	Cluster ClusterConfig
	// Exposure allows listeners on non-loopback addresses without TLS.
	Exposure Exposure

	// Engines (engine) declares engines that carry no kvrouter code, such
	// as stock vLLM or SGLang servers: one entry per engine and
	// data-parallel rank, in fleet/declared's key=value form. EngineDNS
	// (engine_dns) finds such engines by DNS (a headless Service's A/AAAA
	// or SRV records). Both are parsed by Validate into declared and
	// declaredDNS.
	Engines   []string
	EngineDNS []string
	// EngineDNSServer (engine_dns_server) is the host:port of the DNS
	// server engine_dns asks; empty is the system's resolver.
	EngineDNSServer string
	// MinInitialEngines (min_initial_engines) holds the routed endpoints
	// (503 not_ready, and /ready false) until the fleet first counts this
	// many live engines, the reference's startup gate (gate.go). Default 0:
	// serve from the first engine.
	MinInitialEngines int
	// Tokenizers (tokenizer) gives models their tokenizer, MODEL=DIR each
	// (DIR holds tokenizer.json and tokenizer_config.json, or is the path
	// of a tokenizer.json), so that text prompts are routed by the token
	// blocks the engine computes. New loads them.
	Tokenizers  []string
	declared    []declared.Spec
	declaredDNS []declared.DNSSpec

	Dispatch dispatch.Config
	Events   fleet.Config
	Frontend frontend.Config
	// Drain says how the node stops when Run's context ends.
	Drain DrainConfig
	// Selection configures the selection API and the endpoint picker.
	Selection SelectionConfig
}

// DefaultConfig returns the defaults of every option.
func DefaultConfig() Config {
	return Config{
		DC:         "dc1",
		NodeID:     "node1",
		HTTPAddr:   DefaultHTTPAddr,
		NATS:       natsbus.Embedded,
		NATSListen: natsbus.DefaultEmbeddedAddr,
		Dispatch:   dispatch.DefaultConfig(),
	}
}

// Validate checks every option; errors name the option.
func (c *Config) Validate() error {
	if err := kvrpb.ValidDC(c.DC); err != nil {
		return fmt.Errorf("%w: dc: %w", ErrConfig, err)
	}
	if c.NodeID == "" {
		return fmt.Errorf("%w: node_id must be set", ErrConfig)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("%w: http_addr %q: %v", ErrConfig, c.HTTPAddr, err)
	}
	if err := c.natsConfig(nil, nil).Validate(); err != nil {
		return err
	}
	if err := c.Cluster.validate(c.NodeID); err != nil {
		return err
	}
	if c.MinInitialEngines < 0 {
		return fmt.Errorf("%w: min_initial_engines must be >= 0, got %d", ErrConfig, c.MinInitialEngines)
	}
	if err := c.parseDeclared(); err != nil {
		return err
	}
	c.Events.DC = c.DC
	c.Events.NoKVEvents = c.Dispatch.ApproximateMode
	if err := c.Events.EnsureDefaults().Validate(); err != nil {
		return err
	}
	// An engine the router cannot reach is left out until the liveness
	// timeout, by which the event plane has dropped a dead one.
	c.Dispatch.SuspectTimeout = c.Events.LivenessTimeout
	c.Dispatch = c.Dispatch.EnsureDefaults()
	if err := c.Dispatch.Validate(); err != nil {
		return err
	}
	if err := c.Drain.validate(); err != nil {
		return err
	}
	if err := c.Selection.validate(); err != nil {
		return err
	}
	if c.OTLPEndpoint != "" {
		if _, err := telemetry.ParseEndpoint(c.OTLPEndpoint, ""); err != nil {
			return fmt.Errorf("%w: otlp_endpoint: %w", ErrConfig, err)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: tls_cert and tls_key go together", ErrConfig)
	}
	if !frontend.ValidEngineAPIKey(c.Frontend.EngineAPIKey) {
		// The key stays out of the message, which may be logged.
		return fmt.Errorf("%w: engine_api_key holds a space or a control character", ErrConfig)
	}
	if c.Frontend.MaxPromptTokens == 0 {
		c.Frontend.MaxPromptTokens = c.Dispatch.MaxPromptTokens
	}
	// The frontend's options are validated, with its defaults applied, by
	// frontend.New when Run starts it.
	return nil
}

// parseDeclared parses the engine and engine_dns entries; errors name the
// option and the entry.
func (c *Config) parseDeclared() error {
	c.declared, c.declaredDNS = nil, nil
	for _, e := range c.Engines {
		sp, err := declared.ParseSpec(e)
		if err != nil {
			return fmt.Errorf("%w: engine %q: %w", ErrConfig, e, err)
		}
		c.declared = append(c.declared, sp)
	}
	if _, err := declared.Group(c.declared); err != nil {
		return fmt.Errorf("%w: engine: %w", ErrConfig, err)
	}
	if c.EngineDNSServer != "" {
		if _, _, err := net.SplitHostPort(c.EngineDNSServer); err != nil {
			return fmt.Errorf("%w: engine_dns_server %q: %v", ErrConfig, c.EngineDNSServer, err)
		}
	}
	for _, e := range c.EngineDNS {
		d, err := declared.ParseDNS(e)
		if err != nil {
			return fmt.Errorf("%w: engine_dns %q: %w", ErrConfig, e, err)
		}
		c.declaredDNS = append(c.declaredDNS, d)
	}
	return nil
}

// resolver is the DNS resolver of engine discovery.
func (c *Config) resolver() declared.Resolver {
	if c.EngineDNSServer == "" {
		return net.DefaultResolver
	}
	server := c.EngineDNSServer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// loadTokenizers loads the tokenizer entries; errors name the option.
func (c *Config) loadTokenizers() (map[string]*tokenize.Tokenizer, error) {
	m, err := tokenize.LoadModels(c.Tokenizers)
	if err != nil {
		return nil, fmt.Errorf("%w: tokenizer %w", ErrConfig, err)
	}
	return m, nil
}
