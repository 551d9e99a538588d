package main

import (
	"fmt"
	"net"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/fleet/natsbus"
	"github.com/kvrouter/kvrouter/mocker/server"
)

// mockerFlags binds every `kvrouter mocker` option.
type mockerFlags struct {
	cfg        server.Config
	configPath string
	httpAddr   string
	natsURL    string
	natsAuth   natsbus.ClientAuth
	log        logFlags
}

func (f *mockerFlags) register(fs *pflag.FlagSet) {
	c := &f.cfg
	c.EnsureDefaults()
	e := &c.Engine
	e.EnsureDefaults()
	fs.StringVar(&f.configPath, "config", "", "YAML file of options (keys as flag names with underscores); precedence: default < file < KVR_* environment < flag")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:0", "OpenAI-compatible HTTP address of the engine (port 0: any free port)")
	fs.StringVar(&f.natsURL, "nats", "nats://"+natsbus.DefaultEmbeddedAddr, "NATS server URL the engine registers and publishes on")
	fs.Uint64Var(&c.EngineID, "engine-id", 0, "engine id (0: random)")
	fs.StringVar(&c.DC, "dc", c.DC, "data center name; must match the router nodes' --dc")
	fs.IntVar(&c.DPSize, "dp-size", c.DPSize, "data-parallel ranks (one simulated engine each)")
	fs.StringVar(&c.EndpointURL, "endpoint-url", "", "base URL advertised to routers (default: from the listen address)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.HeartbeatInterval, "heartbeat period; routers drop an engine after their liveness timeout")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "output tokens when a request sets no max_tokens")
	fs.StringVar(&e.Model, "model", e.Model, "served model name")
	fs.IntVar(&e.BlockSize, "block-size", e.BlockSize, "KV block size in tokens")
	fs.IntVar(&e.NumBlocks, "num-blocks", e.NumBlocks, "KV capacity per rank in blocks")
	fs.IntVar(&e.MaxNumBatchedTokens, "max-num-batched-tokens", e.MaxNumBatchedTokens, "token budget of one iteration (chunked prefill)")
	fs.IntVar(&e.MaxNumSeqs, "max-num-seqs", e.MaxNumSeqs, "most requests running at once")
	fs.Float64Var(&e.SpeedUp, "speedup", e.SpeedUp, "run the timing model this many times faster than real time")
	fs.StringVar(&c.Protocol, "protocol", c.Protocol, "KV event protocol: kvrouter (NATS event plane) or vllm (vLLM's ZMQ/msgpack publisher with a replay socket, vLLM-named /metrics, no NATS)")
	fs.StringVar(&c.KVEventsEndpoint, "kv-events-endpoint", c.KVEventsEndpoint, "vllm protocol: ZMQ PUB address to bind (rank r binds port+r), like vLLM's kv-events-config endpoint")
	fs.StringVar(&c.ReplayEndpoint, "replay-endpoint", server.DefaultReplayEndpoint, "vllm protocol: ZMQ ROUTER replay address to bind (rank r binds port+r; empty: no replay)")
	fs.StringVar(&c.KVEventsTopic, "kv-events-topic", c.KVEventsTopic, "vllm protocol: topic of the event messages")
	fs.IntVar(&c.ReplayBufferSteps, "replay-buffer-steps", c.ReplayBufferSteps, "vllm protocol: batches kept per rank for replay (vLLM's buffer_steps)")
	fs.StringVar(&c.APIKey, "api-key", "", "require this bearer token on /v1 requests, like vLLM's --api-key (prefer KVR_API_KEY: flags show in process lists)")
	f.registerNATS(fs)
	f.log.register(fs)
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
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMocker(cmd, &f) },
	}
	f.register(cmd.Flags())
	installHelp(cmd)
	return cmd
}

func runMocker(cmd *cobra.Command, f *mockerFlags) error {
	if err := resolveConfig(cmd.Flags(), f.configPath, environ()); err != nil {
		return err
	}
	log, err := f.log.logger(os.Stderr)
	if err != nil {
		return err
	}
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
