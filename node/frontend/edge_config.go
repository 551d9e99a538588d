package frontend

import "github.com/kvrouter/kvrouter/internal/oaiedge"

// EdgeConfig is who may call the frontend, where its admin routes are
// served and how sessions are named. Its operator credentials guard GET
// and DELETE /v1/sessions/{id}, /busy_threshold, POST /v1/route/explain
// and GET /metrics; the relay's gateway must be given the same session
// keys.
type EdgeConfig = oaiedge.EdgeConfig
