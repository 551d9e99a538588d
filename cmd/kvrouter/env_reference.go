package main

import (
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// referenceEnv maps the reference router's DYN_* environment variables
// onto the options they name, so that its deployments' environments work
// unchanged. They sit between the file and kvrouter's own KVR_* variables
// in the precedence: default < file < DYN_* < KVR_* < flag. An entry
// whose option this command does not have is skipped; a variable in no
// entry is ignored silently, since such environments carry many DYN_*
// variables meant for other processes. Later entries of one option win
// over earlier ones, so a current name beats its deprecated alias.
var referenceEnv = []struct {
	Env        string
	Flag       string
	Deprecated bool
}{
	{"DYN_ROUTER_MODE", "router-mode", false},
	{"DYN_ROUTER_LOAD_AWARE", "load-aware", false},
	{"DYN_ROUTER_AGENTIC", "agentic", false},
	{"DYN_ROUTER_MIN_INITIAL_WORKERS", "router-min-initial-workers", false},
	{"DYN_OVERLAP_SCORE_WEIGHT", "router-kv-overlap-score-weight", true},
	{"DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT", "router-kv-overlap-score-weight", true},
	{"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT", "router-kv-overlap-score-credit", false},
	{"DYN_ROUTER_PREFILL_LOAD_SCALE", "router-prefill-load-scale", false},
	{"DYN_ROUTER_USE_KV_EVENTS", "router-kv-events", false},
	{"DYN_ROUTER_TTL_SECS", "router-ttl-secs", false},
	{"DYN_ROUTER_APPROXIMATE_CACHE_POLICY", "router-approximate-cache-policy", false},
	{"DYN_ROUTER_PREDICTED_TTL_SECS", "router-predicted-ttl-secs", false},
	{"DYN_ROUTER_ACTIVE_SEQUENCE_STRIDE", "router-active-sequence-stride", false},
	{"DYN_ROUTER_TRACK_OUTPUT_BLOCKS", "router-track-output-blocks", false},
	{"DYN_SHARED_CACHE_TYPE", "shared-cache-type", false},
	{"DYN_SHARED_CACHE_MULTIPLIER", "shared-cache-multiplier", false},
	{"DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS", "router-active-request-expiry-secs", false},
	{"DYN_ROUTER_SESSION_AFFINITY_TTL_SECS", "router-session-affinity-ttl-secs", false},
	{"DYN_ENCODER_CUDA_TO_CPU_RATIO", "encoder-cuda-to-cpu-ratio", false},
	{"DYN_HTTP_OVERLOAD_STATUS_CODE", "overload-status", false},
	// Queueing and admission (options of the router queue).
	{"DYN_ROUTER_QUEUE_THRESHOLD", "router-queue-threshold", false},
	{"DYN_ROUTER_POLICY_CONFIG", "router-policy-config", false},
	{"DYN_ROUTER_OVERLAP_REFRESH_AFTER_SECS", "router-overlap-refresh-after-secs", false},
	{"DYN_ROUTER_WORKER_SELECTION_POLICY", "router-worker-selection-policy", false},
}

// referenceEnvOf lists the DYN_* variables of a flag, for the generated
// documentation.
func referenceEnvOf(flag string) []string {
	var out []string
	for _, e := range referenceEnv {
		if e.Flag == flag {
			out = append(out, e.Env)
		}
	}
	return out
}

// applyReferenceEnv sets, from environ, the options the DYN_* variables
// name, unless the command line set them.
func applyReferenceEnv(fs *pflag.FlagSet, environ []string) error {
	vals := map[string]string{}
	for _, kv := range environ {
		if name, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "DYN_") {
			vals[name] = val
		}
	}
	for _, e := range referenceEnv {
		val, ok := vals[e.Env]
		if !ok || fs.Lookup(e.Flag) == nil {
			continue
		}
		if e.Deprecated {
			slog.Warn("deprecated environment variable", "variable", e.Env, "option", "--"+e.Flag)
		}
		if err := setFromSource(fs, strings.ReplaceAll(e.Flag, "-", "_"), []string{val}, "environment "+e.Env); err != nil {
			return err
		}
	}
	return nil
}
