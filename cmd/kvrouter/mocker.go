package main

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/mocker/server"
)

// mockerFlags binds every `kvrouter mocker` option.
type mockerFlags struct {
	daemonFlags
	cfg      server.Config
	httpAddr string
	natsURL  string
	natsAuth natsbus.ClientAuth
}

// register registers the mocker's options group by group, in the order
// the help lists them.
func (f *mockerFlags) register(fs *pflag.FlagSet) {
	f.cfg.EnsureDefaults()
	f.cfg.Engine.EnsureDefaults()
	registerGroups(fs, []flagSection{
		{groupGeneral, f.registerGeneral},
		{groupServing, f.registerServing},
		{groupServing, f.registerDisagg},
		{groupModel, f.registerModel},
		{groupEventPlane, f.registerEventPlane},
		{groupObservability, f.log.register},
		{groupAdvanced, f.registerDisaggTiming},
	})
}

func (f *mockerFlags) registerGeneral(fs *pflag.FlagSet) {
	c := &f.cfg
	f.registerConfig(fs)
	fs.Uint64Var(&c.EngineID, "engine-id", 0, "engine id (0: random)")
	fs.StringVar(&c.DC, "dc", c.DC, "data center name; must match the router nodes' --dc")
}

// registerServing registers the engine's OpenAI-compatible HTTP side.
func (f *mockerFlags) registerServing(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:0", "HTTP listen address (port 0: any free port)\nOpenAI-compatible.")
	fs.StringVar(&c.EndpointURL, "endpoint-url", "", "base URL advertised to routers (default: from the listen address)")
	fs.StringVar(&c.APIKey, "api-key", "", "bearer token required on /v1 requests (prefer KVR_API_KEY)\n"+
		"Like vLLM's --api-key; flags show in process lists.")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "output tokens when a request sets no max_tokens")
}

// registerModel registers the simulated engine: its model, its KV cache,
// its batching and its speed.
func (f *mockerFlags) registerModel(fs *pflag.FlagSet) {
	e := &f.cfg.Engine
	fs.StringVar(&e.Model, "model", e.Model, "served model name")
	fs.IntVar(&e.BlockSize, "block-size", e.BlockSize, "KV block size in tokens")
	fs.IntVar(&e.NumBlocks, "num-blocks", e.NumBlocks, "KV capacity per rank in blocks")
	fs.IntVar(&e.MaxNumBatchedTokens, "max-num-batched-tokens", e.MaxNumBatchedTokens, "token budget of one iteration (chunked prefill)")
	fs.IntVar(&e.MaxNumSeqs, "max-num-seqs", e.MaxNumSeqs, "most requests running at once")
	fs.IntVar(&f.cfg.DPSize, "dp-size", f.cfg.DPSize, "data-parallel ranks (one simulated engine each)")
	fs.Float64Var(&e.SpeedUp, "speedup", e.SpeedUp, "timing model speed-up over real time")
}

// registerEventPlane registers how the engine registers and publishes
// its KV events: kvrouter's NATS protocol, or vLLM's ZMQ wire.
func (f *mockerFlags) registerEventPlane(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.Protocol, "protocol", c.Protocol, "event protocol: kvrouter (NATS) or vllm (ZMQ)\n"+
		"vllm: vLLM's msgpack batches on a ZMQ PUB socket with a replay socket, vLLM-named /metrics, no NATS.")
	fs.StringVar(&f.natsURL, "nats", "nats://"+natsbus.DefaultEmbeddedAddr, "NATS server to register on")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.HeartbeatInterval, "heartbeat period (routers drop a silent engine)\n"+
		"Routers drop an engine whose heartbeats stop for their liveness timeout.")
	registerNATSClient(fs, &f.natsAuth)
	fs.StringVar(&c.KVEventsEndpoint, "kv-events-endpoint", c.KVEventsEndpoint, "vllm: ZMQ PUB address to bind\n"+
		"Rank r binds port+r; like vLLM's kv-events-config endpoint.")
	fs.StringVar(&c.ReplayEndpoint, "replay-endpoint", server.DefaultReplayEndpoint, "vllm: replay address (empty: none)\n"+
		"A ROUTER socket; rank r binds port+r.")
	fs.StringVar(&c.KVEventsTopic, "kv-events-topic", c.KVEventsTopic, "vllm: topic of the event messages")
	fs.IntVar(&c.ReplayBufferSteps, "replay-buffer-steps", c.ReplayBufferSteps, "vllm: batches kept per rank for replay\nvLLM's buffer_steps.")
}

func newMockerCmd() *cobra.Command {
	var f mockerFlags
	cmd := &cobra.Command{
		Use:   "mocker",
		Short: "Run a simulated inference engine (OpenAI-compatible HTTP + NATS or vLLM-style ZMQ events)",
		Long: `mocker runs a simulated vLLM-style engine: a paged prefix cache with LRU eviction,
continuous batching with chunked prefill and a timing model of Llama-3.1-8B on one H100,
behind an OpenAI-compatible HTTP server that streams tokens at the model's pace. It
registers with the router nodes over NATS, publishes heartbeats with its load and its KV
cache events, and answers snapshot requests. With --protocol vllm it speaks vLLM's wire
instead: KV events as msgpack batches on a ZMQ PUB socket with a replay ROUTER socket,
opaque block hashes, vLLM-named metrics on /metrics, and no NATS.`,
	}
	return newDaemonCmd(cmd, &f.daemonFlags, f.register, f.run)
}

// run starts the simulated engine and serves until cmd's context ends.
func (f *mockerFlags) run(cmd *cobra.Command, log *slog.Logger) error {
	// Validate before connecting, so that a bad option is reported as
	// such and not as whatever the connection attempt ran into.
	if err := f.cfg.EnsureDefaults().Validate(); err != nil {
		return err
	}
	var nc *nats.Conn
	if f.cfg.Protocol != server.ProtocolVLLM {
		bus, err := natsbus.Open(natsbus.Config{URL: f.natsURL, Name: "kvrouter-mocker", Auth: f.natsAuth}, log)
		if err != nil {
			return fmt.Errorf("--nats: %w", err)
		}
		defer bus.Close()
		nc = bus.Conn
	}
	srv, err := server.New(f.cfg, nc, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", f.httpAddr, err)
	}
	log.Info("mocker serving", "http", ln.Addr().String(), "engine", srv.EngineID(), "model", f.cfg.Engine.Model)
	return srv.Serve(cmd.Context(), ln)
}

// registerDisagg registers the simulated engine's part in disaggregated
// serving: its role and the hand-off it speaks.
func (f *mockerFlags) registerDisagg(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.StringVar(&c.Role, "role", "aggregated", "worker type: aggregated, prefill or decode\n"+
		"Declared in the card (worker_type); routers pair prefill and decode engines of a model.")
	fs.IntVar(&c.BootstrapPort, "bootstrap-port", 0, "prefill: SGLang bootstrap server port (0: vLLM hand-off)\n"+
		"Served on the HTTP listener's host; the card declares it.")
	fs.StringVar(&c.TransferDomain, "transfer-domain", "", "topology domain of KV transfers, declared in the card")
}

// registerDisaggTiming registers the KV transfer's timing and the
// bootstrap wait, tuning rarely changed.
func (f *mockerFlags) registerDisaggTiming(fs *pflag.FlagSet) {
	c := &f.cfg
	fs.DurationVar(&c.BootstrapTimeout, "bootstrap-timeout", c.BootstrapTimeout, "decode: wait for a room's prefill")
	fs.Float64Var(&c.Engine.Timing.KVTransferNanos, "kv-transfer-ns-per-token", c.Engine.Timing.KVTransferNanos,
		"decode: KV transfer ns per token")
	fs.DurationVar(&c.Engine.Timing.KVTransferLatency, "kv-transfer-latency", c.Engine.Timing.KVTransferLatency,
		"decode: fixed cost of a KV transfer")
}
