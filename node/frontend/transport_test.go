package frontend

import (
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// protoOf sends one request through a transport built from cfg and
// returns the protocol the engine answered with.
func protoOf(t *testing.T, cfg Config, url string) string {
	t.Helper()
	tr := newTransport(cfg.withDefaults())
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Proto
}

// TestEngineProtocols checks the protocol choice the package doc
// describes: HTTP/1.1 to http:// engines, HTTP/2 to an https engine that
// offers it, and HTTP/2 by prior knowledge when cleartext HTTP/2 is
// configured.
func TestEngineProtocols(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	plain := httptest.NewServer(ok)
	defer plain.Close()
	tlsEngine := httptest.NewUnstartedServer(ok)
	tlsEngine.EnableHTTP2 = true
	tlsEngine.StartTLS()
	defer tlsEngine.Close()
	roots := x509.NewCertPool()
	roots.AddCert(tlsEngine.Certificate())
	h2c := httptest.NewUnstartedServer(ok)
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetHTTP1(true)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	defer h2c.Close()
	tests := []struct {
		name, url string
		cfg       Config
		want      string
	}{
		{name: "http", url: plain.URL, want: "HTTP/1.1"},
		{name: "https with ALPN h2", url: tlsEngine.URL, cfg: Config{EngineRootCAs: roots}, want: "HTTP/2.0"},
		{name: "http, cleartext HTTP/2 configured", url: h2c.URL, cfg: Config{EngineCleartextHTTP2: true}, want: "HTTP/2.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := protoOf(t, tc.cfg, tc.url); got != tc.want {
				t.Fatalf("protocol %s, want %s", got, tc.want)
			}
		})
	}
}

// TestEngineTransportSettings checks the settings whose absence would go
// unnoticed on loopback: no proxy from the environment, the header
// timeout, and idle connections closed before uvicorn closes them.
func TestEngineTransportSettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.invalid:3128")
	tr := newTransport(Config{}.withDefaults())
	if tr.Proxy != nil {
		t.Fatal("engine requests would honour HTTP_PROXY")
	}
	if tr.IdleConnTimeout != engineIdleTimeout || tr.ResponseHeaderTimeout != UpstreamHeaderTimeout || !tr.DisableCompression {
		t.Fatalf("idle %v, header timeout %v, compression off %v", tr.IdleConnTimeout, tr.ResponseHeaderTimeout, tr.DisableCompression)
	}
}

// TestEngineHeaderTimeout checks that an engine that accepts a request
// but sends no status line is cut at UpstreamHeaderTimeout.
func TestEngineHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	e := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer e.Close()
	defer close(release)
	tr := newTransport(Config{UpstreamHeaderTimeout: 50 * time.Millisecond}.withDefaults())
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/slow", strings.NewReader("x"))
	_, err := tr.RoundTrip(req)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
}
