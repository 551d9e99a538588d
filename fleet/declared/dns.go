package declared

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Resolver is the part of *net.Resolver DNS discovery uses.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

var _ Resolver = (*net.Resolver)(nil)

// DNSSpec declares the engines behind one DNS name: every address of a
// headless Service (name=, A/AAAA records) or every target of its SRV
// records (srv=), each an engine built from the same template.
type DNSSpec struct {
	Name string
	SRV  string
	// Scheme is http or https; Port is the engines' HTTP port for name=
	// (SRV records carry their own).
	Scheme string
	Port   uint16
	// KVEventsPort and ReplayPort are the engines' KV-event publisher and
	// replay ports; 0 when they publish none. Rank r of an engine with
	// DPSize ranks publishes on KVEventsPort+r, as vLLM's data-parallel
	// ranks do.
	KVEventsPort uint16
	ReplayPort   uint16
	// MetricsPath is the Prometheus page's path ("none" turns scraping off).
	MetricsPath string
	DPSize      uint32
	// Template carries model, block size, replay timeout and capacity
	// overrides.
	Template Spec
}

// ParseDNS parses one --engine-dns value:
// name=HOST|srv=NAME,scheme=http,port=8000,model=M,block-size=N,kv-events-port=P,replay-port=P,metrics-path=/metrics,dp-size=N,kv-blocks=N,max-batched-tokens=N.
func ParseDNS(s string) (DNSSpec, error) {
	d := DNSSpec{Scheme: "http", Port: 8000, MetricsPath: "/metrics", DPSize: 1,
		Template: Spec{BlockSize: DefaultBlockSize}}
	err := eachPair(s, func(k, v string) error {
		if ok, err := d.Template.setTemplateKey(k, v); ok {
			return err
		}
		switch k {
		case "name":
			d.Name = strings.TrimSuffix(v, ".")
		case "srv":
			d.SRV = strings.TrimSuffix(v, ".")
		case "scheme":
			if v != "http" && v != "https" {
				return fmt.Errorf("%w: scheme=%q must be http or https", ErrSpec, v)
			}
			d.Scheme = v
		case "port":
			return parsePort(k, v, &d.Port)
		case "kv-events-port":
			return parsePort(k, v, &d.KVEventsPort)
		case "replay-port":
			return parsePort(k, v, &d.ReplayPort)
		case "metrics-path":
			d.MetricsPath = v
		case "dp-size":
			return parseUint(k, v, 1, 1<<10, &d.DPSize)
		default:
			return fmt.Errorf("%w: unknown key %q (known: name, srv, scheme, port, model, block-size, kv-events-port, replay-port, replay-timeout, "+
				"metrics-path, dp-size, kv-blocks, max-batched-tokens, role, type, bootstrap-port, transfer-domain)", ErrSpec, k)
		}
		return nil
	})
	switch {
	case err != nil:
		return DNSSpec{}, err
	case (d.Name == "") == (d.SRV == ""):
		return DNSSpec{}, fmt.Errorf("%w: exactly one of name and srv is required", ErrSpec)
	case d.ReplayPort != 0 && d.KVEventsPort == 0:
		return DNSSpec{}, fmt.Errorf("%w: replay-port needs kv-events-port as well", ErrSpec)
	}
	return d, nil
}

func parsePort(key, v string, dst *uint16) error {
	n, err := strconv.ParseUint(v, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: %s=%q is not a port", ErrSpec, key, v)
	}
	*dst = uint16(n)
	return nil
}

// String names the source in logs.
func (d *DNSSpec) String() string {
	if d.SRV != "" {
		return "srv:" + d.SRV
	}
	return d.Name
}

// Resolve looks the name up and returns the specs of every engine behind
// it, in a stable order.
func (d *DNSSpec) Resolve(ctx context.Context, r Resolver) ([]Spec, error) {
	type target struct {
		host string
		port uint16
	}
	var targets []target
	if d.SRV != "" {
		_, recs, err := r.LookupSRV(ctx, "", "", d.SRV)
		if err != nil {
			return nil, fmt.Errorf("declared: resolve SRV %s: %w", d.SRV, err)
		}
		for _, rec := range recs {
			targets = append(targets, target{strings.TrimSuffix(rec.Target, "."), rec.Port})
		}
	} else {
		addrs, err := r.LookupHost(ctx, d.Name)
		if err != nil {
			return nil, fmt.Errorf("declared: resolve %s: %w", d.Name, err)
		}
		for _, a := range addrs {
			targets = append(targets, target{a, d.Port})
		}
	}
	var out []Spec
	for _, t := range targets {
		out = append(out, d.specs(t.host, t.port)...)
	}
	slices.SortFunc(out, func(a, b Spec) int {
		return strings.Compare(a.URL+"#"+strconv.Itoa(int(a.DPRank)), b.URL+"#"+strconv.Itoa(int(b.DPRank)))
	})
	return slices.CompactFunc(out, func(a, b Spec) bool { return a.URL == b.URL && a.DPRank == b.DPRank }), nil
}

// specs builds the specs of one engine found at host:port.
func (d *DNSSpec) specs(host string, port uint16) []Spec {
	out := make([]Spec, 0, d.DPSize)
	for r := range d.DPSize {
		sp := d.Template
		sp.URL = d.Scheme + "://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
		sp.DPRank = r
		if d.KVEventsPort != 0 {
			sp.KVEvents = "tcp://" + net.JoinHostPort(host, strconv.Itoa(int(d.KVEventsPort)+int(r)))
		}
		if d.ReplayPort != 0 {
			sp.Replay = "tcp://" + net.JoinHostPort(host, strconv.Itoa(int(d.ReplayPort)+int(r)))
		}
		switch d.MetricsPath {
		case "none":
			sp.Metrics = "none"
		default:
			sp.Metrics = sp.URL + d.MetricsPath
		}
		out = append(out, sp)
	}
	return out
}
