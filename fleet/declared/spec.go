package declared

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/routing"
)

// ErrSpec is wrapped by every error about a malformed engine declaration;
// the message names the offending key as the operator wrote it.
var ErrSpec = errors.New("declared: invalid engine declaration")

// DefaultBlockSize is vLLM's default KV block size on GPUs; a declaration
// without block-size assumes it.
const DefaultBlockSize = 16

// maxReplayTimeout bounds replay-timeout: a replay socket that needs
// longer to send its buffer (a few megabytes by default) is as good as
// silent, and the rank's events wait for it.
const maxReplayTimeout = 10 * time.Minute

// Spec declares one data-parallel rank of one engine.
type Spec struct {
	// URL is the engine's OpenAI-compatible base URL (http or https).
	URL string
	// Model is the served model name; empty means the first model the
	// engine lists on /v1/models.
	Model string
	// BlockSize is the engine's KV block size in tokens.
	BlockSize uint32
	// KVEvents and Replay are the engine's KV-event publisher and replay
	// endpoints (tcp://host:port); empty when the engine publishes none.
	KVEvents string
	Replay   string
	// ReplayTimeout bounds one replay request to the engine (0: the
	// subscriber's default, vllmevents.DefaultReplayTimeout). The KV
	// events of the engine rank wait for it, so a replay socket that does
	// not answer stalls them that long before the rank is resynced.
	ReplayTimeout time.Duration
	// Metrics is the URL of the engine's Prometheus page; empty means
	// URL + "/metrics". "none" turns scraping off.
	Metrics string
	// DPRank is the data-parallel rank this entry describes.
	DPRank uint32
	// KVBlocks and MaxBatchedTokens override the capacity the engine
	// reports (vllm:cache_config_info), or the defaults when it reports
	// none.
	KVBlocks         uint64
	MaxBatchedTokens uint32
	// Role is the engine's worker type (role= or type=): aggregated (the
	// default), prefill or decode.
	Role routing.Role
	// BootstrapPort is a prefill engine's KV bootstrap port (SGLang's
	// --disaggregation-bootstrap-port) on the host of URL; 0: none.
	BootstrapPort uint32
	// TransferDomain names the topology domain (rack, zone) within which
	// the engine exchanges KV caches; empty: none.
	TransferDomain string

	// roleKey is the key that set Role, to refuse a second one.
	roleKey string
}

// ParseSpec parses one --engine value:
// url=URL,model=M,block-size=N,kv-events=tcp://h:p,replay=tcp://h:p,replay-timeout=D,metrics=URL,dp-rank=R,kv-blocks=N,
// max-batched-tokens=N,role=prefill|decode|aggregated (or type=),bootstrap-port=N,transfer-domain=D.
// Only url is required.
func ParseSpec(s string) (Spec, error) {
	sp := Spec{BlockSize: DefaultBlockSize}
	err := eachPair(s, func(k, v string) error {
		if ok, err := sp.setTemplateKey(k, v); ok {
			return err
		}
		switch k {
		case "url":
			sp.URL = strings.TrimRight(v, "/")
		case "kv-events":
			sp.KVEvents = v
		case "replay":
			sp.Replay = v
		case "metrics":
			sp.Metrics = v
		case "dp-rank":
			return parseUint(k, v, 0, 1<<10, &sp.DPRank)
		default:
			return fmt.Errorf("%w: unknown key %q (known: url, model, block-size, kv-events, replay, replay-timeout, metrics, dp-rank, "+
				"kv-blocks, max-batched-tokens, role, type, bootstrap-port, transfer-domain)", ErrSpec, k)
		}
		return nil
	})
	if err != nil {
		return Spec{}, err
	}
	return sp, sp.validate()
}

// setTemplateKey sets the keys a static entry and a DNS template share:
// model, block size, replay timeout and capacity overrides. It reports
// whether k is one.
func (sp *Spec) setTemplateKey(k, v string) (bool, error) {
	switch k {
	case "model":
		sp.Model = v
	case "block-size":
		return true, parseUint(k, v, 1, 1<<16, &sp.BlockSize)
	case "kv-blocks":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return true, fmt.Errorf("%w: kv-blocks=%q is not a positive integer", ErrSpec, v)
		}
		sp.KVBlocks = n
	case "max-batched-tokens":
		return true, parseUint(k, v, 1, 1<<24, &sp.MaxBatchedTokens)
	case "replay-timeout":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxReplayTimeout {
			return true, fmt.Errorf("%w: replay-timeout=%q must be a duration in (0, %v]", ErrSpec, v, maxReplayTimeout)
		}
		sp.ReplayTimeout = d
	default:
		return sp.setRoleKey(k, v)
	}
	return true, nil
}

// setRoleKey sets the keys of disaggregated serving a static entry and a
// DNS template share: the worker type, a prefill engine's bootstrap port
// and the transfer domain. It reports whether k is one.
func (sp *Spec) setRoleKey(k, v string) (bool, error) {
	switch k {
	case "role", "type":
		return true, sp.setRole(k, v)
	case "bootstrap-port":
		return true, parseUint(k, v, 1, 65535, &sp.BootstrapPort)
	case "transfer-domain":
		if v == "" || len(v) > 256 {
			return true, fmt.Errorf("%w: transfer-domain=%q must be 1..256 bytes", ErrSpec, v)
		}
		sp.TransferDomain = v
		return true, nil
	}
	return false, nil
}

// setRole sets the worker type from role= or type=, which name the same
// thing (the card's worker_type), so only one of them may be given.
func (sp *Spec) setRole(k, v string) error {
	if sp.roleKey != "" {
		return fmt.Errorf("%w: %s=%q: the worker type is already given by %s", ErrSpec, k, v, sp.roleKey)
	}
	r, err := routing.ParseRole(v)
	if err != nil || v == "" {
		return fmt.Errorf("%w: %s=%q is not a worker type (known: aggregated, prefill, decode)", ErrSpec, k, v)
	}
	sp.Role, sp.roleKey = r, k
	return nil
}

func (sp *Spec) validate() error {
	if sp.BootstrapPort != 0 && sp.Role != routing.RolePrefill {
		return fmt.Errorf("%w: bootstrap-port is a prefill engine's (set role=prefill)", ErrSpec)
	}
	if err := checkHTTPURL("url", sp.URL); err != nil {
		return err
	}
	if sp.Metrics != "" && sp.Metrics != "none" {
		if err := checkHTTPURL("metrics", sp.Metrics); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{"kv-events": sp.KVEvents, "replay": sp.Replay} {
		if v != "" && !strings.HasPrefix(v, "tcp://") && !strings.HasPrefix(v, "ipc://") {
			return fmt.Errorf("%w: %s=%q must be a tcp:// or ipc:// endpoint", ErrSpec, k, v)
		}
	}
	if sp.Replay != "" && sp.KVEvents == "" {
		return fmt.Errorf("%w: replay=%q needs kv-events as well", ErrSpec, sp.Replay)
	}
	return nil
}

// MetricsURL is where the engine's Prometheus page is, or "" when scraping
// is off.
func (sp *Spec) MetricsURL() string {
	switch sp.Metrics {
	case "none":
		return ""
	case "":
		return sp.URL + "/metrics"
	}
	return sp.Metrics
}

func checkHTTPURL(key, v string) error {
	u, err := url.Parse(v)
	if v == "" {
		return fmt.Errorf("%w: %s is required", ErrSpec, key)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %s=%q is not an http(s) URL", ErrSpec, key, v)
	}
	return nil
}

// eachPair calls f with every key=value pair of a comma-separated list.
func eachPair(s string, f func(k, v string) error) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: empty declaration", ErrSpec)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: %q is not key=value", ErrSpec, kv)
		}
		if seen[k] {
			return fmt.Errorf("%w: key %q given twice", ErrSpec, k)
		}
		seen[k] = true
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

func parseUint(key, v string, lo, hi uint64, dst *uint32) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("%w: %s=%q must be an integer in %d..%d", ErrSpec, key, v, lo, hi)
	}
	*dst = uint32(n)
	return nil
}
