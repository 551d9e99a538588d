package extproc

import (
	"net/http"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvrouter/kvrouter/internal/oaiedge"
)

// The endpoint-picker protocol's names.
const (
	// DestinationHeader carries the chosen endpoint (host:port) to the
	// gateway, in the request headers and in the dynamic metadata.
	DestinationHeader = "x-gateway-destination-endpoint"
	// MetadataNamespace is the dynamic metadata's namespace of the
	// destination.
	MetadataNamespace = "envoy.lb"
	// PrefillHeader names the prefill engine (host:port) of a
	// disaggregated request to the decode engine's sidecar, which sends
	// the prefill hop there before decoding: llm-d's routing sidecar's
	// name (PrefillEndpointHeader in llm-d-inference-scheduler's
	// pkg/common/routing).
	PrefillHeader = "x-prefiller-host-port"
)

// destination is the common answer that routes the request to endpoint
// (with the prefill engine of a pair, prefill, for the decode engine's
// sidecar), and the dynamic metadata that says the same; with endpoint ""
// (a request falling through) it changes nothing else. A prefill header
// the client sent is removed: it would make the sidecar send the prompt
// wherever the client says.
func destination(endpoint, prefill string) (*extprocv3.CommonResponse, *structpb.Struct) {
	hm := &extprocv3.HeaderMutation{}
	if prefill != "" {
		hm.SetHeaders = append(hm.SetHeaders, setHeader(PrefillHeader, prefill))
	} else {
		hm.RemoveHeaders = []string{PrefillHeader}
	}
	if endpoint == "" {
		return &extprocv3.CommonResponse{HeaderMutation: hm}, nil
	}
	hm.SetHeaders = append(hm.SetHeaders, setHeader(DestinationHeader, endpoint))
	c := &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: hm}
	md := &structpb.Struct{Fields: map[string]*structpb.Value{MetadataNamespace: structpb.NewStructValue(&structpb.Struct{
		Fields: map[string]*structpb.Value{DestinationHeader: structpb.NewStringValue(endpoint)}})}}
	return c, md
}

func setHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func requestHeaders(c *extprocv3.CommonResponse, md *structpb.Struct) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{DynamicMetadata: md,
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: c}}}
}

func requestBody(c *extprocv3.CommonResponse, md *structpb.Struct) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{DynamicMetadata: md,
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: c}}}
}

// streamedBody sends a body chunk back in FULL_DUPLEX_STREAMED mode,
// where Envoy forwards only what the processor returns.
func streamedBody(chunk []byte, eos bool) *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: chunk, EndOfStream: eos}}}}
}

// immediate answers the client at once with err's class and OpenAI body.
func immediate(c oaiedge.Class, err error) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: envoyStatus(c.Status)},
		Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}},
		Body:    oaiedge.ErrorJSON(err, c), Details: "kvrouter_" + c.Code}}}
}

// envoyStatus is status as Envoy's enum, which admits only the statuses
// it defines (a 529 or 499 would fail its validation): an undefined
// client error is 400 and an undefined server error 503.
func envoyStatus(status int) typev3.StatusCode {
	if _, ok := typev3.StatusCode_name[int32(status)]; ok && status != 0 {
		return typev3.StatusCode(status)
	}
	if status < 500 {
		return typev3.StatusCode_BadRequest
	}
	return typev3.StatusCode(http.StatusServiceUnavailable)
}

// The endpoint-picker protocol's subset hint: the endpoints the picker
// must choose among, in the request's filter metadata.
const (
	// SubsetNamespace is the filter metadata's namespace of the hint.
	SubsetNamespace = "envoy.lb.subset_hint"
	// SubsetKey is the hint's key: a list of <ip:port>.
	SubsetKey = "x-gateway-destination-endpoint-subset"
)

// subsetHint reads the hint of md: its endpoints and whether the key is
// set. A set key restricts the choice even when nothing usable is in it
// (the protocol's answer to an empty list is 503), so entries that are
// not strings name nothing; a string value, which the protocol does not
// define, is read as a comma-separated list, as the destination header
// is written.
func subsetHint(md *corev3.Metadata) ([]string, bool) {
	v, ok := md.GetFilterMetadata()[SubsetNamespace].GetFields()[SubsetKey]
	if !ok {
		return nil, false
	}
	out := []string{}
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if s, ok := e.GetKind().(*structpb.Value_StringValue); ok {
				out = append(out, s.StringValue)
			}
		}
	case *structpb.Value_StringValue:
		out = append(out, strings.Split(k.StringValue, ",")...)
	}
	return out, true
}
