package main

import (
	"github.com/spf13/pflag"

	"github.com/kvrouter/kvrouter/node"
	"github.com/kvrouter/kvrouter/node/extproc"
	"github.com/kvrouter/kvrouter/node/selection"
)

// registerSelection registers the selection edges beside the OpenAI
// frontend: the selection API and the gateway's endpoint picker, off by
// default, on loopback when given without an address.
func (f *nodeFlags) registerSelection(fs *pflag.FlagSet) {
	s := &f.cfg.Selection
	fs.BoolVar(&s.NoFrontend, "no-frontend", false, "serve no OpenAI proxy: only the selection API and the picker\n"+
		"Health, readiness, metrics, admin and the API's HTTP/JSON mirror stay on --http-addr.")
	fs.StringVar(&s.Addr, "select-addr", "", "selection API gRPC listen address (alone: "+node.DefaultSelectAddr+")")
	fs.Lookup("select-addr").NoOptDefVal = node.DefaultSelectAddr
	fs.StringVar(&s.ExtProcAddr, "ext-proc-addr", "", "Envoy ext_proc endpoint picker address (alone: "+node.DefaultExtProcAddr+")")
	fs.Lookup("ext-proc-addr").NoOptDefVal = node.DefaultExtProcAddr
}

// registerSelectionSecurity registers the client CA of the selection
// edges' gRPC listeners.
func (f *nodeFlags) registerSelectionSecurity(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.Selection.ClientCA, "select-client-ca", "", "PEM CA of the selection and picker clients' certificates\n"+
		"With --tls-cert and --tls-key: mutual TLS, required on a non-loopback --select-addr or --ext-proc-addr.")
}

// registerSelectionAdvanced registers the selection edges' limits and
// failure mode.
func (f *nodeFlags) registerSelectionAdvanced(fs *pflag.FlagSet) {
	s := &f.cfg.Selection
	fs.DurationVar(&s.ExtProc.Deadline, "ext-proc-deadline", extproc.DefaultDeadline, "picker: longest decision after the body\n"+
		"Past it the request gets 504, or falls through with --ext-proc-fail-open.")
	fs.BoolVar(&s.ExtProc.FailOpen, "ext-proc-fail-open", false, "picker: route nothing rather than fail a request\n"+
		"When no engine is free of faults (not when overloaded): the gateway's own balancing applies.")
	fs.IntVar(&s.ExtProc.OverloadStatus, "ext-proc-overload-status", 429, "picker: HTTP status of an overload\nOne Envoy defines (not 529).")
	fs.DurationVar(&s.API.ReservationTTL, "select-reservation-ttl", selection.DefaultReservationTTL, "free an unreleased reservation after it")
	fs.DurationVar(&s.API.SelectionTTL, "select-selection-ttl", selection.DefaultSelectionTTL, "keep a selection for Reserve this long")
}
