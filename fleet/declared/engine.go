package declared

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/kvrouter/kvrouter/proto/kvrpb"
	"github.com/kvrouter/kvrouter/routing"
)

// Defaults for the capacity fields of a card when neither the declaration
// nor the engine's page gives them. They only shape the load model's
// projections, not correctness: vLLM's default max_num_batched_tokens
// for online serving, and a cache size typical of one 80 GB GPU serving
// an 8B model in blocks of 16.
const (
	DefaultMaxBatchedTokens = 8192
	DefaultKVBlocks         = 32768
)

// Engine is the specs of one engine (one URL), indexed by rank.
type Engine struct {
	URL   string
	ID    routing.WorkerID
	Ranks []Spec
}

// EngineID derives an engine's id from its URL, so that every router node
// and every restart of one names the engine alike.
func EngineID(url string) routing.WorkerID {
	if id := xxh3.HashString(url); id != 0 {
		return routing.WorkerID(id)
	}
	return 1
}

// Group gathers specs into engines by URL. The ranks of one engine must be
// 0..n-1, each once, with one model and block size.
func Group(specs []Spec) ([]Engine, error) {
	byURL := map[string][]Spec{}
	var urls []string
	for _, sp := range specs {
		if _, ok := byURL[sp.URL]; !ok {
			urls = append(urls, sp.URL)
		}
		byURL[sp.URL] = append(byURL[sp.URL], sp)
	}
	slices.Sort(urls)
	out := make([]Engine, 0, len(urls))
	for _, u := range urls {
		e, err := group(u, byURL[u])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func group(url string, specs []Spec) (Engine, error) {
	e := Engine{URL: url, ID: EngineID(url), Ranks: make([]Spec, len(specs))}
	seen := make([]bool, len(specs))
	for _, sp := range specs {
		switch {
		case int(sp.DPRank) >= len(specs) || seen[sp.DPRank]:
			return Engine{}, fmt.Errorf("%w: engine %s: dp-rank %d given twice or leaves a rank undeclared (ranks must be 0..%d)",
				ErrSpec, url, sp.DPRank, len(specs)-1)
		case sp.Model != specs[0].Model || sp.BlockSize != specs[0].BlockSize:
			return Engine{}, fmt.Errorf("%w: engine %s: its ranks declare different model or block-size", ErrSpec, url)
		case sp.Role != specs[0].Role || sp.BootstrapPort != specs[0].BootstrapPort || sp.TransferDomain != specs[0].TransferDomain:
			return Engine{}, fmt.Errorf("%w: engine %s: its ranks declare different role, bootstrap-port or transfer-domain", ErrSpec, url)
		}
		seen[sp.DPRank] = true
		e.Ranks[sp.DPRank] = sp
	}
	return e, nil
}

// card builds the engine's registration card for the given model, capacity
// and incarnation.
func (e *Engine) card(model string, kvBlocks uint64, incarnation uint64) *kvrpb.WorkerCard {
	sp := e.Ranks[0]
	c := &kvrpb.WorkerCard{
		EngineId: uint64(e.ID), DpSize: uint32(len(e.Ranks)), Model: model, BlockSize: sp.BlockSize,
		TotalKvBlocks: kvBlocks, MaxNumBatchedTokens: cmp.Or(sp.MaxBatchedTokens, DefaultMaxBatchedTokens),
		Device: kvrpb.DeviceKind_DEVICE_KIND_GPU, EndpointUrl: e.URL, Incarnation: incarnation, Version: kvrpb.Version,
		BootstrapPort: sp.BootstrapPort, TransferDomain: sp.TransferDomain,
	}
	if sp.Role != routing.RoleAggregated {
		c.WorkerType = sp.Role.String()
	}
	h := xxh3.New()
	for _, s := range []string{c.Model, c.EndpointUrl, strconv.Itoa(int(c.DpSize)), strconv.Itoa(int(c.BlockSize)),
		strconv.FormatUint(c.TotalKvBlocks, 10), strconv.Itoa(int(c.MaxNumBatchedTokens)),
		c.WorkerType, strconv.Itoa(int(c.BootstrapPort)), c.TransferDomain} {
		_, _ = h.WriteString(s)
		_, _ = h.Write([]byte{0})
	}
	sum := h.Sum128().Bytes()
	c.Checksum = hex.EncodeToString(sum[:8])
	return c
}
