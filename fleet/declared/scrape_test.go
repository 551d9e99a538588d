package declared

import (
	"strings"
	"testing"
)

const vllmPage = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="M"} 3.0
vllm:num_requests_running{engine="1",model_name="M"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="M"} 2.0
vllm:num_requests_waiting{engine="1",model_name="M"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="M"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="M"} 1.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",num_gpu_blocks="4096"} 1.0
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7e+09
`

const sglangPage = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="M"} 5.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="M"} 7.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="M"} 0.5
`

func TestParsePage(t *testing.T) {
	pg, err := ParsePage(strings.NewReader(vllmPage))
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := pg.Ranks[0], pg.Ranks[1]
	if r0.Running != 3 || r0.Waiting != 2 || r0.KVUsage != 0.25 || !r0.HasUsage || r1.Running != 1 || r1.KVUsage != 1 {
		t.Fatalf("ranks = %+v", pg.Ranks)
	}
	if pg.BlockSize != 16 || pg.KVBlocks != 4096 || pg.StartTime != 1.7e9 {
		t.Fatalf("page = %+v", pg)
	}
	sg, err := ParsePage(strings.NewReader(sglangPage))
	if err != nil || sg.Ranks[0] != (RankFigures{Running: 5, Waiting: 7, KVUsage: 0.5, HasUsage: true}) || sg.BlockSize != 0 {
		t.Fatalf("sglang page = %+v, %v", sg, err)
	}
	if _, err := ParsePage(strings.NewReader("vllm:num_requests_running{engine=\"0\" 3\n")); err == nil {
		t.Fatal("a malformed page must be an error")
	}
}

func FuzzParsePage(f *testing.F) {
	f.Add(vllmPage)
	f.Add(sglangPage)
	f.Fuzz(func(t *testing.T, s string) {
		pg, err := ParsePage(strings.NewReader(s))
		if err == nil && pg == nil {
			t.Fatal("nil page without error")
		}
	})
}
