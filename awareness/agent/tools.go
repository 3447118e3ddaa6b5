package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
)

// CallIDKey is the key of the agent's tool call id in a call's and its
// result's _meta.
const CallIDKey = "tobe/call_id"

// Capabilities is what the tools need of the runner: the capabilities it
// has and, for each, its params and targets.
type Capabilities interface {
	Capabilities() []act.Capability
	Describe(name string) ([]act.Param, []string, bool)
}

// Content is every tool result, as its text and as its
// structuredContent: the AdapterCallResult content of ToBe's Awareness
// extension, status success with the operation's data, or status error
// with its refusal. Each tool's outputSchema is its shape (resultSchema).
type Content struct {
	Status string           `json:"status"` // "success" or "error"
	Data   any              `json:"data,omitempty"`
	Error  *awareness.Error `json:"error,omitempty"`
}

// ToolName is the tool of an action capability: its name with "_" for
// "." (gpio.set: gpio_set).
func ToolName(capability string) string { return strings.ReplaceAll(capability, ".", "_") }

// The drain tool's input schema and the JSON of its data's schema,
// derived when an agent's session first asks for them, as the table's
// are.
var (
	drainInSchema = sync.OnceValue(func() *jsonschema.Schema {
		s := mustSchema[DrainIn]()
		s.Properties["limit"].Minimum = ptr(0.0)
		return s
	})
	drainedSchema = sync.OnceValue(func() json.RawMessage { return mustJSON(mustSchema[Drained]()) })
)

// errorSchema is the JSON of the schema of a result's error, derived when
// first asked for: an awareness.Error without its record, which a result
// carries as its data (awareness.Unrecorded).
var errorSchema = sync.OnceValue(func() json.RawMessage {
	s := mustSchema[awareness.Error]()
	delete(s.Properties, "record")
	s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(p string) bool { return p == "record" })
	return mustJSON(s)
})

// mustSchema is T's schema as the table derives its operations'; T is a
// type of this package's that has one.
func mustSchema[T any]() *jsonschema.Schema {
	s, err := awareness.SchemaFor[T]()
	if err != nil {
		panic(fmt.Sprintf("agent: the schema of %T: %v", *new(T), err))
	}
	return s
}

// mustJSON is a schema derived from a type as JSON.
func mustJSON(s *jsonschema.Schema) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("agent: a derived schema does not marshal: %v", err))
	}
	return b
}

// resultSchema is the output schema of a tool whose data has the schema
// data (JSON): Content's shape. Status success comes with data and
// without an error; status error with the error, and with data only when
// the body recorded what it refused: the runner's record of a refused
// action (an act.Result), which only action.do folds into a refusal and
// which is then its output's type, so data has one schema either way.
// It uses only keywords that JSON Schema draft 7 and 2020-12 read alike,
// for clients that validate a result with either (the TypeScript SDK's
// Ajv reads draft 7). It is JSON, not a jsonschema.Schema, for the memory
// a schema takes (see awareness.Entry.OutSchemaJSON).
func resultSchema(data json.RawMessage) json.RawMessage {
	return fmt.Appendf(nil, `{"type":"object","properties":{"status":{"type":"string","enum":["success","error"]},"data":%s,"error":%s},`+
		`"required":["status"],"additionalProperties":false,`+
		`"if":{"properties":{"status":{"const":"success"}}},"then":{"required":["data"],"not":{"required":["error"]}},"else":{"required":["error"]}}`,
		data, errorSchema())
}

// addDrain gives srv the drain tool of subscriber sub.
func addDrain(srv *mcp.Server, sub *subscriber) {
	srv.AddTool(&mcp.Tool{Name: "drain", InputSchema: drainInSchema(), OutputSchema: resultSchema(drainedSchema()), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Description: "The observations of the body queued for this session since the last drain (oldest first), how many the queue dropped, and how many were not pushed: for a client that does not read notifications/tobe/observation, and after a reconnect."},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in DrainIn
			if err := awareness.DecodeParams(req.Params.Arguments, &in); err != nil || in.Limit < 0 {
				if err == nil {
					err = fmt.Errorf("limit %d: want 0 or more", in.Limit)
				}
				return result(req, nil, &awareness.Error{Op: "drain", Reason: awareness.ReasonInvalidParams, Detail: err.Error()}), nil
			}
			return result(req, sub.drain(in.Limit), nil), nil
		})
}

// addTools gives srv the tools for principal p: each operation of the
// table whose least admits p under its tool's name (Table.Tools), and
// one tool per action capability when action.do admits p. The admin
// operations (reset, grants, approvals, backups) admit no agent.
func addTools(srv *mcp.Server, t *awareness.Table, caps Capabilities, p act.Principal) error {
	for _, e := range t.Tools(p) {
		ann := &mcp.ToolAnnotations{ReadOnlyHint: e.Tool.ReadOnly, IdempotentHint: e.Tool.Idempotent}
		if !e.Tool.ReadOnly {
			ann.DestructiveHint = ptr(e.Tool.Destructive)
		}
		srv.AddTool(&mcp.Tool{Name: e.Tool.Name, Description: e.Description, InputSchema: e.InSchema(), OutputSchema: resultSchema(e.OutSchemaJSON()), Annotations: ann},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				out, err := e.Call(ctx, p, req.Params.Arguments)
				if m, ok := out.(awareness.Media); ok && err == nil {
					return mediaResult(req, m), nil
				}
				return result(req, out, err), nil
			})
	}
	do, ok := t.Lookup(awareness.OpDo.Name)
	if !ok || !do.Tool.PerCapability {
		return fmt.Errorf("agent: the table has no %s offered per capability", awareness.OpDo.Name)
	}
	if !do.Least.Admits(p) {
		return nil
	}
	cs := caps.Capabilities()
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	for _, c := range cs {
		params, targets, ok := caps.Describe(c.Name)
		if !ok {
			continue // a capability that does not say what it takes is offered through no tool
		}
		schema := actionSchema(params, targets)
		tool := ToolName(c.Name)
		srv.AddTool(&mcp.Tool{Name: tool, InputSchema: schema, OutputSchema: resultSchema(do.OutSchemaJSON()),
			Description: fmt.Sprintf("%s (risk %s; verified by %s). %s", c.Name, c.Risk, c.Verify, do.Description),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(!c.Reversible)}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				in, err := doIn(c.Name, params, req.Params.Arguments)
				if err != nil {
					return result(req, nil, &awareness.Error{Op: tool, Reason: awareness.ReasonInvalidParams, Detail: err.Error()}), nil
				}
				out, err := awareness.Invoke(ctx, t, awareness.OpDo, p, in)
				if err != nil {
					oe := awareness.ErrorOf(err)
					oe.Op = tool // the agent called the tool, not action.do
					err = oe
				}
				return result(req, out, err), nil
			})
	}
	return nil
}

// The arguments of an action tool besides its params.
var actionArgs = map[string]*jsonschema.Schema{
	"idempotency_key": {Type: "string", MaxLength: ptr(128), Description: "a retry with the same key returns the first result and acts no second time"},
	"mode":            {Type: "string", Enum: []any{"live", "shadow", "simulation"}, Description: "live (the default) acts; shadow records only; simulation runs the simulated driver"},
	"timeout_ms":      {Type: "integer", Minimum: ptr(1.0), Maximum: ptr(600000.0), Description: "bounds the action (the runner's 30 s when not given)"},
	"note":            {Type: "string", MaxLength: ptr(1024), Description: "why, for the record"},
	"caused_by":       {Type: "string", Description: "the id of the event that caused this request (an observation's id): its trust and evidence are weighed"},
}

func ptr[T any](v T) *T { return &v }

// actionSchema is the input schema of an action tool: target among the
// body's, the capability's params typed, and the request's own fields.
func actionSchema(params []act.Param, targets []string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, Required: []string{"target"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	enum := make([]any, len(targets))
	for i, t := range targets {
		enum[i] = t
	}
	s.Properties["target"] = &jsonschema.Schema{Type: "string", Enum: enum, Description: "what to act on, as this body names it"}
	for _, p := range params {
		ps := &jsonschema.Schema{Type: p.Type, Description: p.Description, Minimum: p.Min, Maximum: p.Max}
		for _, v := range p.Enum {
			ps.Enum = append(ps.Enum, v)
		}
		s.Properties[p.Name] = ps
		if p.Required {
			s.Required = append(s.Required, p.Name)
		}
	}
	for k, v := range actionArgs {
		s.Properties[k] = v
	}
	return s
}

// doIn reads an action tool's arguments strictly into a request of
// capability: a key the tool does not take, a value of the wrong type, or
// trailing data is an error naming it. Params go to the runner as the
// strings it reads (integers without a fraction).
func doIn(capability string, params []act.Param, raw json.RawMessage) (awareness.DoIn, error) {
	in := awareness.DoIn{Capability: capability, Params: map[string]string{}}
	var args map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return in, fmt.Errorf("arguments: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return in, fmt.Errorf("arguments: more than one value")
	}
	byName := map[string]act.Param{}
	for _, p := range params {
		byName[p.Name] = p
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := args[k]
		var err error
		switch k {
		case "target":
			err = json.Unmarshal(v, &in.Target)
		case "idempotency_key":
			err = json.Unmarshal(v, &in.IdempotencyKey)
		case "mode":
			err = json.Unmarshal(v, &in.Mode)
		case "timeout_ms":
			err = json.Unmarshal(v, &in.TimeoutMS)
		case "note":
			err = json.Unmarshal(v, &in.Note)
		case "caused_by":
			err = json.Unmarshal(v, &in.CausedBy)
		default:
			p, ok := byName[k]
			if !ok {
				return in, fmt.Errorf("arguments.%s: %s takes no %q", k, capability, k)
			}
			in.Params[k], err = paramString(p, v)
		}
		if err != nil {
			return in, fmt.Errorf("arguments.%s: %v", k, err)
		}
	}
	return in, nil
}

// paramString is a param's value as the runner reads it.
func paramString(p act.Param, v json.RawMessage) (string, error) {
	switch p.Type {
	case "integer", "number":
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&n); err != nil {
			return "", fmt.Errorf("want a number")
		}
		if p.Type == "integer" {
			i, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil {
				return "", fmt.Errorf("%s: want a whole number", n)
			}
			return strconv.FormatInt(i, 10), nil
		}
		if _, err := n.Float64(); err != nil {
			return "", fmt.Errorf("%s: want a number", n)
		}
		return n.String(), nil
	default:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("want a string")
		}
		return s, nil
	}
}

// result is a tool's result: out, or err's refusal, as toolReply writes
// it. What the body recorded of what it refused (an action's record) is
// the data beside the refusal.
func result(req *mcp.CallToolRequest, out any, err error) *mcp.CallToolResult {
	if err != nil {
		oe, rec := awareness.Unrecorded(err)
		return toolReply(req, Content{Status: "error", Data: rec, Error: oe})
	}
	return toolReply(req, Content{Status: "success", Data: out})
}

// mediaResult is the result of an operation whose output is one piece
// of media: its result as any tool's, and its bytes as image or audio
// content after it. The bytes are read whole (at most
// awareness.MaxMedia) and the output closed on every path.
func mediaResult(req *mcp.CallToolRequest, m awareness.Media) *mcp.CallToolResult {
	defer m.Close()
	r, n := m.Content()
	fail := func(detail string) *mcp.CallToolResult {
		return toolReply(req, Content{Status: "error", Error: &awareness.Error{Op: req.Params.Name, Reason: awareness.ReasonFailed, Detail: detail}})
	}
	if n > awareness.MaxMedia {
		return fail(fmt.Sprintf("%d bytes of %s, more than the %d a result carries", n, m.MediaType(), awareness.MaxMedia))
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return fail(fmt.Sprintf("its %d bytes could not be read: %v", n, err))
	}
	res := toolReply(req, Content{Status: "success", Data: m})
	switch mt := m.MediaType(); {
	case strings.HasPrefix(mt, "image/"):
		res.Content = append(res.Content, &mcp.ImageContent{Data: data, MIMEType: mt})
	case strings.HasPrefix(mt, "audio/"):
		res.Content = append(res.Content, &mcp.AudioContent{Data: data, MIMEType: mt})
	default:
		return fail("media of type " + mt + " cannot be sent as a tool's content")
	}
	return res
}

// toolReply is c as a tool's result: its JSON as the text and, the same
// bytes, as the structuredContent; IsError with status error; and the
// call's id back in _meta.
func toolReply(req *mcp.CallToolRequest, c Content) *mcp.CallToolResult {
	text, err := json.Marshal(c)
	if err != nil {
		c = Content{Status: "error", Error: &awareness.Error{Op: req.Params.Name, Reason: awareness.ReasonFailed, Detail: "the result could not be encoded: " + err.Error()}}
		text, _ = json.Marshal(c)
	}
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: json.RawMessage(text), IsError: c.Status == "error"}
	if id, ok := req.Params.Meta[CallIDKey]; ok {
		r.Meta = mcp.Meta{CallIDKey: id}
	}
	return r
}
