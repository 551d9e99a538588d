package service

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestGroupPeers(t *testing.T) {
	tests := []struct {
		name    string
		peers   []Peer
		want    []peerDC
		wantErr bool
	}{
		{name: "one relay per DC",
			peers: []Peer{{DC: "b", PublishAddr: "b1:7200", GatewayURL: "http://b1:8080", WANRTT: 10 * time.Millisecond}},
			want:  []peerDC{{DC: "b", Publish: []string{"b1:7200"}, Gateways: []string{"http://b1:8080"}, WANRTT: 10 * time.Millisecond}}},
		{name: "two relays of one DC, one of another",
			peers: []Peer{
				{DC: "b", PublishAddr: "b1:7200", GatewayURL: "http://b1:8080", WANRTT: time.Millisecond},
				{DC: "c", PublishAddr: "c1:7200", GatewayURL: "http://c1:8080", WANRTT: 2 * time.Millisecond},
				{DC: "b", PublishAddr: "b2:7200", GatewayURL: "http://b2:8080", WANRTT: time.Millisecond},
			},
			want: []peerDC{
				{DC: "b", Publish: []string{"b1:7200", "b2:7200"}, Gateways: []string{"http://b1:8080", "http://b2:8080"}, WANRTT: time.Millisecond},
				{DC: "c", Publish: []string{"c1:7200"}, Gateways: []string{"http://c1:8080"}, WANRTT: 2 * time.Millisecond},
			}},
		{name: "two round trips for one DC",
			peers: []Peer{
				{DC: "b", PublishAddr: "b1:7200", GatewayURL: "http://b1:8080", WANRTT: time.Millisecond},
				{DC: "b", PublishAddr: "b2:7200", GatewayURL: "http://b2:8080", WANRTT: 5 * time.Millisecond},
			}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkRTTs(tt.peers); (err != nil) != tt.wantErr {
				t.Fatalf("checkRTTs: %v, want error %v", err, tt.wantErr)
			} else if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("%v is not ErrConfig", err)
				}
				return
			}
			got := groupPeers(tt.peers)
			if !slices.EqualFunc(got, tt.want, func(a, b peerDC) bool {
				return a.DC == b.DC && a.WANRTT == b.WANRTT && slices.Equal(a.Publish, b.Publish) && slices.Equal(a.Gateways, b.Gateways)
			}) {
				t.Fatalf("groupPeers = %+v, want %+v", got, tt.want)
			}
		})
	}
}
