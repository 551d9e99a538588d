package dispatch

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/routing"
)

// HostPort is the host:port of an engine's base URL, as a gateway names
// endpoints (its destination header, its subset hint): the URL's port,
// else its scheme's.
func HostPort(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("engine URL %q has no host", baseURL)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// allowed maps r.Subset to the engines of r.Model whose endpoint it
// lists, through the registry, sorted: an engine's endpoint is the
// host:port of its URL, which all its ranks share. An entry that is not a
// host:port, or names no engine, allows nothing.
func (d *Dispatcher) allowed(r *Request) []routing.WorkerID {
	subset := make(map[string]struct{}, len(r.Subset))
	for _, e := range r.Subset {
		if k, ok := endpointKey(e); ok {
			subset[k] = struct{}{}
		}
	}
	out := make([]routing.WorkerID, 0, len(subset))
	ranks, _ := d.engines.Workers(r.Model)
	for i := range ranks {
		id := ranks[i].Worker.ID
		if i > 0 && ranks[i-1].Worker.ID == id {
			continue // the registry lists an engine's ranks together
		}
		// An engine without a URL, or whose URL has no host, has the key
		// "", which no subset entry has.
		u, _ := d.engines.Endpoint(id)
		hp, _ := HostPort(u)
		k, _ := endpointKey(hp)
		if _, in := subset[k]; in {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// endpointKey is a host:port in one spelling: the host in lower case
// (DNS names are case-insensitive) and an IPv6 address in brackets.
func endpointKey(hostPort string) (string, bool) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(hostPort))
	if err != nil || host == "" || port == "" {
		return "", false
	}
	return net.JoinHostPort(strings.ToLower(host), port), true
}
