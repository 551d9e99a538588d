package selection

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/kvrouter/kvrouter/internal/metrics"
	"github.com/kvrouter/kvrouter/internal/oaiedge"
	"github.com/kvrouter/kvrouter/proto/kvrpb"
)

// The HTTP/JSON mirror's paths. Bodies and answers are the gRPC messages
// in protobuf's JSON mapping (lowerCamelCase or the proto field names on
// input, lowerCamelCase on output); errors are the OpenAI error body.
const (
	PathSelect           = "/v1/select"
	PathSelectAndReserve = "/v1/select_and_reserve"
	PathReservations     = "/v1/reservations"
)

// Routes are the mirror's routes, for the node's HTTP listener, which
// guards them as client (API) routes. body reads request bodies under
// the listener's limits.
func (s *Service) Routes(body oaiedge.BodyReader) []oaiedge.Route {
	h := mirror{s: s, body: body}
	return []oaiedge.Route{
		{Pattern: "POST " + PathSelect, Handler: serve(h, s.selectOne)},
		{Pattern: "POST " + PathSelectAndReserve, Handler: serve(h, s.selectAndReserve)},
		{Pattern: "POST " + PathReservations, Handler: serve(h, s.reserve)},
		{Pattern: "POST " + PathReservations + "/{id}/prefill_complete", Handler: h.prefillComplete},
		{Pattern: "DELETE " + PathReservations + "/{id}", Handler: h.release},
	}
}

// mirror serves the HTTP/JSON calls.
type mirror struct {
	s    *Service
	body oaiedge.BodyReader
}

// serve decodes a body into a new message M (In is its pointer type),
// runs method and answers.
func serve[M any, In interface {
	*M
	proto.Message
}](h mirror, method func(context.Context, In) (*kvrpb.SelectResponse, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := h.s.cfg.Now()
		in := In(new(M))
		var out proto.Message
		err := h.decode(w, r, in)
		if err == nil {
			out, err = method(r.Context(), in)
		}
		h.answer(w, start, out, err)
	}
}

// prefillComplete serves POST /v1/reservations/{id}/prefill_complete.
func (h mirror) prefillComplete(w http.ResponseWriter, r *http.Request) {
	start := h.s.cfg.Now()
	out, err := h.s.prefillComplete(&kvrpb.SelectReservationRef{ReservationId: r.PathValue("id")})
	h.answer(w, start, out, err)
}

// release serves DELETE /v1/reservations/{id}[?outcome=failed|unreachable|prefill_unreachable]:
// an outcome is a SelectOutcome's name in lower case, without its prefix.
func (h mirror) release(w http.ResponseWriter, r *http.Request) {
	start := h.s.cfg.Now()
	var out proto.Message
	var err error
	o := cmp.Or(r.URL.Query().Get("outcome"), "succeeded")
	v, ok := kvrpb.SelectOutcome_value["SELECT_OUTCOME_"+strings.ToUpper(o)]
	if in := kvrpb.SelectOutcome(v); ok && strings.ToLower(in.String()) == "select_outcome_"+o {
		out, err = h.s.release(&kvrpb.SelectReleaseRequest{ReservationId: r.PathValue("id"), Outcome: in})
	} else {
		err = oaiedge.Invalid("outcome", "outcome must be succeeded, failed, unreachable or prefill_unreachable, got %q", o)
	}
	h.answer(w, start, out, err)
}

// decode reads the body under the listener's limits into m.
func (h mirror) decode(w http.ResponseWriter, r *http.Request, m proto.Message) error {
	data, hold, err := h.body.ReadHeld(w, r, nil)
	if err != nil {
		return err
	}
	// The message holds copies of what it decodes: the body's share of
	// the budget is back once it is decoded.
	defer hold.Release()
	if err := protojson.Unmarshal(data, m); err != nil {
		return oaiedge.Invalid("", "body is not a %s in JSON: %v", m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

// answer writes out, or err in the OpenAI shape with its class's status.
func (h mirror) answer(w http.ResponseWriter, start time.Time, out proto.Message, err error) {
	c := h.s.errs.Classify(err)
	h.s.observe(metrics.EdgeSelectHTTP, start, c, err)
	if err != nil {
		oaiedge.WriteJSON(w, c.Status, oaiedge.ErrorJSON(err, c))
		return
	}
	data, err := protojson.Marshal(out)
	if err != nil {
		h.s.errs.Write(w, err)
		return
	}
	oaiedge.WriteJSON(w, http.StatusOK, data)
}
