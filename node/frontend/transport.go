package frontend

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// maxIdlePerEngine bounds the idle HTTP/1.1 connections kept per engine
// address: enough for the requests in flight to one engine at a busy
// node's rate, so that a burst does not end in a dial per request.
const maxIdlePerEngine = 256

// engineIdleTimeout is how long an idle engine connection stays in the
// pool: just under the 5 s keep-alive timeout of uvicorn, which serves
// vLLM's and SGLang's OpenAI APIs. net/http notices an engine that
// closed an idle connection in the background, but not one that closes
// it while a request is being written on it, and a completion (a POST)
// that fails so is not replayed; closing first avoids the race.
const engineIdleTimeout = 4 * time.Second

// engineKeepAlive is the TCP keep-alive period of engine connections,
// which finds a vanished engine host under a long, silent generation.
const engineKeepAlive = 30 * time.Second

// newTransport builds the engine client from the upstream settings (the
// package doc says why each choice). There is no fleet-wide cap on idle
// connections: they never outnumber the requests in flight during the
// last engineIdleTimeout, and a cap below that would make a node in front
// of many engines close and redial connections under steady load.
func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.UpstreamDialTimeout, KeepAlive: engineKeepAlive}
	return &http.Transport{
		Proxy:                 cfg.EngineProxy,
		DialContext:           dialEngine(dialer.DialContext),
		TLSClientConfig:       &tls.Config{RootCAs: cfg.EngineRootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.UpstreamDialTimeout,
		MaxIdleConnsPerHost:   maxIdlePerEngine,
		IdleConnTimeout:       min(cfg.IdleTimeout, engineIdleTimeout),
		ResponseHeaderTimeout: cfg.UpstreamHeaderTimeout,
		DisableCompression:    true,
		ReadBufferSize:        64 << 10,
		Protocols:             engineProtocols(cfg.EngineCleartextHTTP2),
	}
}

// engineProtocols are HTTP/1.1, and HTTP/2 where an https engine offers it
// by ALPN; with cleartext set, HTTP/2 by prior knowledge on http:// too,
// and then only HTTP/2 (net/http speaks unencrypted HTTP/2 only when
// HTTP/1 is off).
func engineProtocols(cleartext bool) *http.Protocols {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetHTTP1(!cleartext)
	p.SetUnencryptedHTTP2(cleartext)
	return &p
}
