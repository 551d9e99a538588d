package extproc

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

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
