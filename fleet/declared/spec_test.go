package declared

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/routing"
	"github.com/kvrouter/kvrouter/routing/wire"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Spec
		wantErr string
	}{
		{name: "full", in: "url=http://h:8000/,model=M,block-size=64,kv-events=tcp://h:5557,replay=tcp://h:5558,replay-timeout=2s,metrics=http://h:8000/metrics,dp-rank=1,kv-blocks=100,max-batched-tokens=4096",
			want: Spec{URL: "http://h:8000", Model: "M", BlockSize: 64, KVEvents: "tcp://h:5557", Replay: "tcp://h:5558", ReplayTimeout: 2 * time.Second,
				Metrics: "http://h:8000/metrics", DPRank: 1, KVBlocks: 100, MaxBatchedTokens: 4096}},
		{name: "url only takes defaults", in: "url=https://e.example", want: Spec{URL: "https://e.example", BlockSize: DefaultBlockSize}},
		{name: "unknown key is named", in: "url=http://h,blocksize=64", wantErr: `unknown key "blocksize"`},
		{name: "url required", in: "model=M", wantErr: "url is required"},
		{name: "url scheme", in: "url=h:8000", wantErr: `url="h:8000" is not an http(s) URL`},
		{name: "block size range", in: "url=http://h,block-size=0", wantErr: `block-size="0"`},
		{name: "replay needs events", in: "url=http://h,replay=tcp://h:1", wantErr: "needs kv-events"},
		{name: "replay timeout is a duration", in: "url=http://h,replay-timeout=5", wantErr: `replay-timeout="5"`},
		{name: "replay timeout is positive", in: "url=http://h,replay-timeout=-1s", wantErr: `replay-timeout="-1s"`},
		{name: "replay timeout is bounded", in: "url=http://h,replay-timeout=1h", wantErr: `replay-timeout="1h"`},
		{name: "event endpoint scheme", in: "url=http://h,kv-events=h:1", wantErr: `kv-events="h:1"`},
		{name: "duplicate key", in: "url=http://h,url=http://g", wantErr: `key "url" given twice`},
		{name: "not key=value", in: "url=http://h,oops", wantErr: `"oops" is not key=value`},
		{name: "empty", in: " ", wantErr: "empty declaration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpec(tc.in)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrSpec containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseDNS(t *testing.T) {
	d, err := ParseDNS("name=vllm.ns.svc.cluster.local.,port=9000,model=M,block-size=32,kv-events-port=5557,replay-port=5600,replay-timeout=3s,dp-size=2,kv-blocks=7")
	if err != nil {
		t.Fatal(err)
	}
	specs := d.specs("10.1.2.3", 9000)
	if len(specs) != 2 || specs[1].KVEvents != "tcp://10.1.2.3:5558" || specs[1].Replay != "tcp://10.1.2.3:5601" ||
		specs[0].URL != "http://10.1.2.3:9000" || specs[0].Metrics != "http://10.1.2.3:9000/metrics" ||
		specs[1].DPRank != 1 || specs[0].BlockSize != 32 || specs[0].KVBlocks != 7 || specs[0].Model != "M" ||
		specs[1].ReplayTimeout != 3*time.Second {
		t.Fatalf("specs = %+v", specs)
	}
	if v6 := d.specs("fd00::1", 80); v6[0].URL != "http://[fd00::1]:80" {
		t.Fatalf("IPv6 URL = %s", v6[0].URL)
	}
	for _, bad := range []string{"port=1", "name=a,srv=b", "name=a,port=x", "name=a,scheme=ftp", "name=a,replay-port=2", "name=a,color=red"} {
		if _, err := ParseDNS(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseDNS(%q) = %v, want ErrSpec", bad, err)
		}
	}
}

func TestGroup(t *testing.T) {
	r0 := Spec{URL: "http://a", Model: "M", BlockSize: 16}
	r1 := r0
	r1.DPRank = 1
	engines, err := Group([]Spec{r1, r0, {URL: "http://b", BlockSize: 16}})
	if err != nil || len(engines) != 2 || len(engines[0].Ranks) != 2 || engines[0].Ranks[1].DPRank != 1 || engines[0].ID != EngineID("http://a") {
		t.Fatalf("Group = %+v, %v", engines, err)
	}
	r2 := r0
	r2.DPRank = 2
	for name, specs := range map[string][]Spec{
		"rank twice":      {r0, r0},
		"rank gap":        {r0, r2},
		"different model": {r0, {URL: "http://a", Model: "N", BlockSize: 16, DPRank: 1}},
	} {
		if _, err := Group(specs); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: err = %v, want ErrSpec", name, err)
		}
	}
}

func TestCardIsStableAndValid(t *testing.T) {
	e, _ := Group([]Spec{{URL: "http://a:1", BlockSize: 16}})
	c1, c2 := e[0].card("M", 10, 5), e[0].card("M", 10, 5)
	if c1.Checksum != c2.Checksum || c1.EngineId == 0 || c1.MaxNumBatchedTokens != DefaultMaxBatchedTokens {
		t.Fatalf("cards %+v %+v", c1, c2)
	}
	if c3 := e[0].card("M", 11, 5); c3.Checksum == c1.Checksum {
		t.Fatal("a capacity change must change the checksum")
	}
}

// TestParseSpecDisaggRoles: role= (or type=) declares a prefill or decode
// engine, bootstrap-port a prefill engine's SGLang bootstrap server, and
// the card carries both; an unknown worker type is a clear error.
func TestParseSpecDisaggRoles(t *testing.T) {
	sp, err := ParseSpec("url=http://p:8000,role=prefill,bootstrap-port=8998,transfer-domain=rack-1")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Role != routing.RolePrefill || sp.BootstrapPort != 8998 || sp.TransferDomain != "rack-1" {
		t.Fatalf("spec %+v", sp)
	}
	e, err := Group([]Spec{sp})
	if err != nil {
		t.Fatal(err)
	}
	c := e[0].card("M", 10, 1)
	if c.WorkerType != "prefill" || c.BootstrapPort != 8998 || c.TransferDomain != "rack-1" {
		t.Fatalf("card %+v", c)
	}
	if err := wire.ValidateCard(c); err != nil {
		t.Fatal(err)
	}
	if d, _ := ParseSpec("url=http://d:8000,type=decode"); d.Role != routing.RoleDecode {
		t.Fatalf("type=decode: %+v", d)
	}
	if agg := e[0].card("M", 10, 1); agg.Checksum == (&Engine{URL: e[0].URL, ID: e[0].ID, Ranks: []Spec{{URL: e[0].URL, BlockSize: 16}}}).card("M", 10, 1).Checksum {
		t.Fatal("the role must change the card's checksum")
	}
	for in, want := range map[string]string{
		"url=http://h,role=prefil":                   `role="prefil" is not a worker type`,
		"url=http://h,type=":                         `type="" is not a worker type`,
		"url=http://h,role=decode,type=decode":       "already given by role",
		"url=http://h,bootstrap-port=8998":           "bootstrap-port is a prefill engine's",
		"url=http://h,role=prefill,bootstrap-port=0": `bootstrap-port="0"`,
	} {
		if _, err := ParseSpec(in); err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q) = %v, want ErrSpec containing %q", in, err, want)
		}
	}
}
