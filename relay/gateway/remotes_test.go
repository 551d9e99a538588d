package gateway

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadURL is the base URL of a port nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// TestLocatorFailsOverBetweenGateways asks a remote DC whose first
// gateway refuses connections: the lookup must be answered by the next
// one, and fail only when every gateway refuses.
func TestLocatorFailsOverBetweenGateways(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(HomeAnswer{Session: r.PathValue("id"), DC: "b", Bound: true})
	}))
	defer live.Close()
	tests := []struct {
		name      string
		url       string
		alternate []string
		wantBound bool
		wantErr   bool
	}{
		{name: "first refuses", url: deadURL(t), alternate: []string{live.URL}, wantBound: true},
		{name: "first answers", url: live.URL, alternate: []string{deadURL(t)}, wantBound: true},
		{name: "every gateway refuses", url: deadURL(t), alternate: []string{deadURL(t)}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remotes := []Remote{{DC: "b", URL: tt.url, Alternates: tt.alternate, WANRTT: time.Millisecond}}
			l := NewHTTPLocator(remotes, NewHomes("a", "b"), live.Client(), time.Now, 0, 0)
			dc, ok, err := l.Locate(context.Background(), "s1")
			if (err != nil) != tt.wantErr || ok != tt.wantBound || (ok && dc != "b") {
				t.Fatalf("Locate = %q, %v, %v; want bound %v, error %v", dc, ok, err, tt.wantBound, tt.wantErr)
			}
		})
	}
}

func TestRemoteGatewaysValidated(t *testing.T) {
	tests := []struct {
		name    string
		alt     []string
		wantErr bool
	}{
		{name: "no alternates", alt: nil},
		{name: "good alternate", alt: []string{"http://10.0.0.2:8080/"}},
		{name: "bad alternate", alt: []string{"not a url"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{DC: "a", Remotes: []Remote{{DC: "b", URL: "http://10.0.0.1:8080", Alternates: tt.alt}}}
			if err := c.validateRemotes(); (err != nil) != tt.wantErr {
				t.Fatalf("validateRemotes: %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
