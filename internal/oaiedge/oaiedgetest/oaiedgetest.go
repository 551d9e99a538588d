package oaiedgetest

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"
)

// TimedPost posts body to url as JSON, reads the whole answer, fails tb
// unless it is a 200, and returns how long that took.
func TimedPost(tb testing.TB, c *http.Client, url string, body []byte) time.Duration {
	tb.Helper()
	start := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("status %d", resp.StatusCode)
	}
	return time.Since(start)
}
