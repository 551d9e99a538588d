// Package selection is the router node's selection API: the routing
// decision for a request that the caller (a gateway, an ingress, a batch
// driver) sends to the chosen engine itself. It serves the Selection gRPC
// service (proto/kvr/v1/selection.proto) and its HTTP/JSON mirror, which
// the node mounts on its HTTP listener (Routes).
//
// One decision path. Requests are built by frontend.Requests, as the
// OpenAI frontend builds its own (parser, tokenizer, session keys, pins,
// policy class, nvext and priority headers), and decided by the node's
// dispatcher: Select by Dispatcher.Select, which books nothing and binds
// a new session; SelectAndReserve and Reserve by Dispatcher.Route, which
// books the request's load as a proxied request's is (the admission queue
// included) and binds the session at its first token or on a successful
// release, through the same session store (the DC's Raft bindings in a
// cluster). Errors are classified by the frontend's rows (ErrorRows) plus
// this package's, in one table (errors.go): HTTP status for the mirror,
// the gRPC code of that status for the service.
//
// Reservations. A reservation holds a Decision until Release (any
// outcome), PrefillComplete ends its prefill load first. A reservation
// that is never released expires after Config.ReservationTTL (5 minutes
// by default, the load tracker's own bound on a request whose end never
// arrived) and its load is freed, so a crashed caller cannot leak load;
// at most Config.MaxReservations are outstanding. Reservation ids are
// random and unguessable. A selection is kept for Reserve for
// Config.SelectionTTL (120 s) or until Config.MaxSelectionBytes of newer
// selections push it out, whichever comes first; Reserve books it once.
//
// Disaggregated serving. A model with prefill and decode engines is
// decided as the dispatcher decides it, in pairs: the answer's worker is
// the decode engine and prefill_worker the prefill engine, with its
// bootstrap port and data-parallel size. A reservation holds both hops'
// bookings (PrefillComplete ends the prefill hop's); Reserve pins both
// engines its Select chose; Release with PREFILL_UNREACHABLE makes the
// prefill engine a suspect of the prefill stage.
//
// Refusals. The package proxies nothing and does not retry. A selection's
// engine may leave before the caller uses it; the caller then selects
// again.
//
// Concurrency. Service is safe for concurrent use. Each reservation's
// Decision is driven under its own lock, so its callbacks never run at
// once. Expiry runs on the runtime's timers (time.AfterFunc); Close stops
// them and frees every outstanding reservation.
package selection
