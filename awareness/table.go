package awareness

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// Kind says what an operation does to the body.
type Kind string

// Kinds of operation.
const (
	Observe  Kind = "observe"  // reads; changes nothing
	Interact Kind = "interact" // acts on the world through the runner, or stops it
	Admin    Kind = "admin"    // changes what the body may do (grants, approvals, the e-stop's reset, backups)
)

// Least is the least principal an operation admits: one of Kinds, at
// Trust or above.
type Least struct {
	Kinds []act.PrincipalKind `json:"kinds"`
	Trust ledger.Level        `json:"trust"`
}

// kindNames name the principal kinds for people.
var kindNames = map[act.PrincipalKind]string{act.LocalAdmin: "local administrator", act.AgentSession: "agent",
	act.MQTTCommand: "MQTT command", act.LocalRule: "local rule"}

// String says who is admitted: "a local administrator at high trust or
// above".
func (l Least) String() string {
	kinds := make([]string, len(l.Kinds))
	for i, k := range l.Kinds {
		kinds[i] = cmp.Or(kindNames[k], string(k))
	}
	return fmt.Sprintf("a %s at %s trust or above", strings.Join(kinds, " or "), l.Trust)
}

// Admits tells whether p is at least l; a principal without a kind or a
// subject is no principal and is never admitted.
func (l Least) Admits(p act.Principal) bool {
	return p.Kind != "" && p.Subject != "" && p.Trust >= l.Trust && p.Trust <= ledger.Max && slices.Contains(l.Kinds, p.Kind)
}

// The principals the operations admit.
var (
	// Anyone is every kind of principal at low trust: reading, stopping,
	// and asking the runner, whose policy weighs the caller's trust.
	Anyone = Least{Kinds: []act.PrincipalKind{act.LocalAdmin, act.AgentSession, act.MQTTCommand, act.LocalRule}, Trust: ledger.Low}
	// AdminOrAgent is a local administrator or an agent at low trust:
	// reading the ledger, which the handler filters for agents by privacy.
	AdminOrAgent = Least{Kinds: []act.PrincipalKind{act.LocalAdmin, act.AgentSession}, Trust: ledger.Low}
	// AnyAdmin is a local administrator at any trust above off.
	AnyAdmin = Least{Kinds: []act.PrincipalKind{act.LocalAdmin}, Trust: ledger.Low}
	// HighAdmin is a local administrator at high trust: what changes what
	// the body may do.
	HighAdmin = Least{Kinds: []act.PrincipalKind{act.LocalAdmin}, Trust: ledger.High}
	// MaxAdmin is a local administrator at max trust: what lets R3 run
	// (approving an R3 action; a grant that covers R3 is checked by its
	// handler, since only the grant's patterns say whether it does).
	MaxAdmin = Least{Kinds: []act.PrincipalKind{act.LocalAdmin}, Trust: ledger.Max}
)

// Reasons of refusal the operations add to the runner's.
const (
	// ReasonNotAuthorized: the principal is below the operation's least
	// (Error.Need says what was needed), or there is no principal.
	ReasonNotAuthorized act.Reason = "not_authorized"
	// ReasonInvalidParams: the input does not decode into the operation's
	// input type, or a field is out of its range; Detail names it.
	ReasonInvalidParams act.Reason = "invalid_params"
	// ReasonNotFound: what the input names (an action, a grant) is not
	// there.
	ReasonNotFound act.Reason = "not_found"
	// ReasonUnavailable: the part of the body the operation needs is not
	// there (no e-stop on this board, the ledger not open).
	ReasonUnavailable act.Reason = "unavailable"
	// ReasonFailed: the operation ran and failed (a write the disk
	// refused); Detail says how.
	ReasonFailed act.Reason = "failed"
	// ReasonBusy: the transport has no room for the caller now (too many
	// connections of its own, or of everyone's); Detail says which limit.
	// Nothing ran.
	ReasonBusy act.Reason = "busy"
)

// Error is an operation's refusal or failure: every one names its reason.
type Error struct {
	Op     string     `json:"op"`
	Reason act.Reason `json:"reason"`
	Detail string     `json:"detail,omitempty"`
	// Need is what the operation needed, with not_authorized.
	Need *Least `json:"need,omitempty"`
	// Record is what the body recorded of what it refused: the runner's
	// record of an action it refused (an act.Result, with the action's
	// id when the refusal was recorded), nil for every other error. A
	// transport passes it on with the refusal (the admin socket in the
	// error's data; an agent's tool and an MQTT command's result as
	// their data, beside the error without it). Decoded from JSON
	// without a type to decode it into, it is what encoding/json makes
	// of an object.
	Record any `json:"record,omitempty"`
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %s", e.Op, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.Op, e.Reason, e.Detail)
}

// refuse makes an Error without the operation's name, which Call adds.
func refuse(r act.Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Unrecorded is err's refusal (ErrorOf) without its Record, and the
// record: a transport that carries a result's data beside its error (an
// agent's tool, an MQTT command) sends the record as that data.
func Unrecorded(err error) (*Error, any) {
	oe := ErrorOf(err)
	rec := oe.Record
	oe.Record = nil
	return oe, rec
}

// ReasonOf is the reason of an operation's error, as ErrorOf reads it.
func ReasonOf(err error) act.Reason { return ErrorOf(err).Reason }

// Op defines an operation: its name, what it does, its kind, the least
// principal it admits, and its input and output types, from which its
// JSON Schemas come. Ops are values of this package, so a client names an
// operation by its typed definition, never by a string.
type Op[In, Out any] struct {
	Name        string
	Description string
	Kind        Kind
	Least       Least
	// Stop marks the operation that stops the body (only estop.trip): a
	// transport answers it on its own path, at once, never queued behind
	// other calls nor refused for want of room; the principal is checked
	// as for any other operation.
	Stop bool
	// Tool is how an agent is offered the operation; every operation
	// whose least admits agents says, and no other does.
	Tool Tool
	// Resource, when its URI is set, offers the operation's output to an
	// agent as an MCP resource too, which it may read and subscribe to.
	Resource Resource
}

// Resource is an operation offered to an agent as an MCP resource: an
// observation that takes no input, read as the operation with the
// session's principal, and said to have changed when the ledger records
// an event whose type Changes names (a type, or a prefix ending in a
// dot), or, with Channels, when a channel's state or health changes.
// Which agents see it follows from the operation's least, as its tool's.
type Resource struct {
	URI      string   `json:"uri,omitempty"`
	Changes  []string `json:"changes,omitempty"`
	Channels bool     `json:"channels,omitempty"`
}

// Tool is how an operation is offered to an agent as a tool of its MCP
// server: a name of its own with its annotations, or one tool per action
// capability. Which agents see it follows from the operation's least
// principal (Table.Tools). The annotations are hints to the agent, never
// what it may do: a call is checked as any other.
type Tool struct {
	// Name is the tool's name, in lower case with underscores
	// (body_status); empty with PerCapability.
	Name string `json:"name,omitempty"`
	// ReadOnly says the tool changes nothing: so is every Observe
	// operation's, and no other.
	ReadOnly bool `json:"read_only,omitempty"`
	// Destructive says the tool may remove or undo what is there; it is
	// said of a tool that is not ReadOnly.
	Destructive bool `json:"destructive,omitempty"`
	// Idempotent says a repeat with the same arguments does nothing more.
	Idempotent bool `json:"idempotent,omitempty"`
	// PerCapability offers the operation (action.do) as one tool per
	// action capability, named after it, each with annotations of its
	// own; the transport makes them.
	PerCapability bool `json:"per_capability,omitempty"`
}

// Streaming is an operation's output that carries bytes besides its
// result (a snapshot of the ledger): the output marshals as the result,
// whose JSON says how many bytes there are in "bytes", and Content gives
// them. A transport that can send bytes after a result sends Content's
// after the result's and Closes the output on every path, sent or not;
// one that cannot leaves out the entries whose Streams is set.
type Streaming interface {
	// Content is the bytes and how many there are; it is read once.
	Content() (io.Reader, int64)
	// Close releases what holds the bytes (an open file).
	io.Closer
}

var streamingType = reflect.TypeFor[Streaming]()

// Media is a Streaming output whose bytes are one piece of media a person
// or a model can be shown whole (a JPEG, a WAV) of at most MaxMedia
// bytes: an agent's transport sends them as its tool result's image or
// audio content beside the result, so such an operation may be offered
// to agents.
type Media interface {
	Streaming
	// MediaType is the bytes' (image/jpeg, audio/wav).
	MediaType() string
}

var mediaType = reflect.TypeFor[Media]()

// progressKey keys the progress function in a context.
type progressKey struct{}

// WithProgress returns ctx carrying f, which a long operation (taking a
// snapshot) calls as its work goes on with done and total in its unit
// (bytes). f is called from the operation's goroutine and must not block.
// Progress is all a context carries to an operation: the principal is an
// argument, never a context value.
func WithProgress(ctx context.Context, f func(done, total int64)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// Progress is the progress function ctx carries, or nil.
func Progress(ctx context.Context) func(done, total int64) {
	f, _ := ctx.Value(progressKey{}).(func(done, total int64))
	return f
}

// Handler runs an operation for principal p. Its error is an *Error when
// it refuses; any other error is a failure.
type Handler[In, Out any] func(ctx context.Context, p act.Principal, in In) (Out, error)

// Entry is one operation of a table: its definition with a handler.
type Entry struct {
	Name        string
	Description string
	Kind        Kind
	Least       Least
	// Stop is the Op's Stop: answered at once, never queued or refused
	// for want of room.
	Stop     bool
	Tool     Tool
	Resource Resource
	In, Out  reflect.Type
	// Streams, set by NewTable, says Out is Streaming: the operation's
	// output carries bytes besides its result. A transport that cannot
	// send them must not offer the operation. Media says they are one
	// piece of media (Out is Media), which an agent's transport sends.
	Streams, Media bool
	call           func(ctx context.Context, p act.Principal, params json.RawMessage) (any, error)
	// invoke runs the handler with an input of type In.
	invoke func(ctx context.Context, p act.Principal, in any) (any, error)
	// The schemas of In and Out, derived when first asked for.
	inSchema, outSchema func() *jsonschema.Schema
	// outJSON is the JSON of Out's schema, derived when first asked for.
	outJSON func() json.RawMessage
}

// InSchema is the JSON Schema of In (an agent's tool takes it as its
// input schema). It is derived when first asked for and kept from then
// on: the body asks for it only when an agent's session lists its tools.
// The schema is shared: a caller must not change it.
func (e *Entry) InSchema() *jsonschema.Schema { return e.inSchema() }

// OutSchema is the JSON Schema of Out, derived when first asked for and
// kept from then on. The schema is shared: a caller must not change it.
func (e *Entry) OutSchema() *jsonschema.Schema { return e.outSchema() }

// OutSchemaJSON is OutSchema as JSON, for a transport that only sends it
// (an agent's tool gives it in its output schema). It is derived when
// first asked for and kept from then on as its bytes alone, without the
// schema: a schema holds some twenty times the memory of its JSON, and
// the body keeps one for every tool once an agent comes. The bytes are
// shared: a caller must not change them.
func (e *Entry) OutSchemaJSON() json.RawMessage { return e.outJSON() }

// Bind gives op its handler.
func Bind[In, Out any](op Op[In, Out], h Handler[In, Out]) *Entry {
	run := func(ctx context.Context, p act.Principal, in In) (any, error) {
		out, err := h(ctx, p, in)
		if err != nil {
			if st, ok := any(out).(Streaming); ok {
				st.Close() // an output that comes with an error is nobody's
			}
			return nil, err
		}
		return out, nil
	}
	return &Entry{Name: op.Name, Description: op.Description, Kind: op.Kind, Least: op.Least, Stop: op.Stop, Tool: op.Tool, Resource: op.Resource,
		In: reflect.TypeFor[In](), Out: reflect.TypeFor[Out](),
		call: func(ctx context.Context, p act.Principal, params json.RawMessage) (any, error) {
			var in In
			if err := DecodeParams(params, &in); err != nil && !op.Stop {
				return nil, refuse(ReasonInvalidParams, "%v", err)
			} else if err != nil {
				in = *new(In) // a stop is never refused: it goes on without what could not be read
			}
			return run(ctx, p, in)
		},
		invoke: func(ctx context.Context, p act.Principal, in any) (any, error) { return run(ctx, p, in.(In)) }}
}

// Call runs the operation for principal p with params (JSON; empty or
// null read as {}). p is checked first: a principal below the
// operation's least, or none at all, is refused with not_authorized
// before params are read. Params are read strictly: an unknown key, a
// wrong type or trailing data is invalid_params. Every error returned is
// an *Error carrying the operation's name; an action the runner refused
// is such an error, with its reason and the runner's record of it
// (Error.Record). When Streams is set, the output returned with a nil
// error is Streaming and the caller must Close it; with an error there is
// nothing to close.
func (e *Entry) Call(ctx context.Context, p act.Principal, params json.RawMessage) (any, error) {
	if err := e.admit(p); err != nil {
		return nil, err
	}
	return e.named(e.call(ctx, p, params))
}

// admit refuses p when it is below the operation's least, or no
// principal at all.
func (e *Entry) admit(p act.Principal) error {
	if e.Least.Admits(p) {
		return nil
	}
	need := e.Least
	who := "no principal"
	if p.Kind != "" || p.Subject != "" {
		who = fmt.Sprintf("%s at %s trust", cmp.Or(p.Subject, "a principal without a subject"), p.Trust)
	}
	return &Error{Op: e.Name, Reason: ReasonNotAuthorized, Detail: fmt.Sprintf("%s needs %s; the caller is %s", e.Name, need, who), Need: &need}
}

// named is out, or err as an *Error naming the operation.
func (e *Entry) named(out any, err error) (any, error) {
	if err != nil {
		oe := ErrorOf(err)
		oe.Op = e.Name
		return nil, oe
	}
	return out, nil
}

// Invoke runs op of table t for principal p with in, an input already
// read: what Entry.Call does without reading JSON. p is checked first,
// and every error returned is an *Error carrying the operation's name; a
// table without op, or whose operation of op's name has other types, is
// unavailable. When the error carries a Record of type Out (an action the
// runner refused), out is that record; otherwise it is the zero Out with
// an error. A Streaming out returned with a nil error is the caller's to
// Close.
func Invoke[In, Out any](ctx context.Context, t *Table, op Op[In, Out], p act.Principal, in In) (Out, error) {
	var zero Out
	e, ok := t.Lookup(op.Name)
	if !ok || e.In != reflect.TypeFor[In]() || e.Out != reflect.TypeFor[Out]() {
		return zero, &Error{Op: op.Name, Reason: ReasonUnavailable, Detail: fmt.Sprintf("the table has no %s taking %v and giving %v", op.Name, reflect.TypeFor[In](), reflect.TypeFor[Out]())}
	}
	if err := e.admit(p); err != nil {
		return zero, err
	}
	out, err := e.named(e.invoke(ctx, p, in))
	if err != nil {
		rec, _ := ErrorOf(err).Record.(Out)
		return rec, err
	}
	o, _ := out.(Out)
	return o, nil
}

// ErrorOf is the one way from an error to a refusal with its reason,
// which every transport writes in its own shape: an operation's own
// *Error; act's refusals with theirs; act's sentinel errors of things
// that are not there (not_found), of bad input (invalid_params) and of a
// body without a ledger (unavailable); any other error is failed. It
// returns a copy the caller may change; a nil error is failed too (a
// transport asks only about errors).
func ErrorOf(err error) *Error {
	var oe *Error
	var r *act.Refusal
	switch {
	case errors.As(err, &oe):
		c := *oe
		return &c
	case errors.As(err, &r):
		return &Error{Reason: r.Reason, Detail: r.Detail}
	case errors.Is(err, act.ErrNoLedger):
		return &Error{Reason: ReasonUnavailable, Detail: err.Error()}
	case errors.Is(err, act.ErrNotWaiting), errors.Is(err, act.ErrUnknownGrant), errors.Is(err, act.ErrNoSuchAction):
		return &Error{Reason: ReasonNotFound, Detail: err.Error()}
	case errors.Is(err, act.ErrInvalidGrant), errors.Is(err, act.ErrGrantRevoked):
		return &Error{Reason: ReasonInvalidParams, Detail: err.Error()}
	}
	if err == nil {
		return &Error{Reason: ReasonFailed, Detail: "no error"}
	}
	return &Error{Reason: ReasonFailed, Detail: err.Error()}
}

// DecodeParams reads params into v strictly: an unknown key is an error
// naming it, trailing data is an error, and empty or null params read as
// {}.
func DecodeParams(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return errors.New("params: more than one value")
	}
	return nil
}

// Table is every operation the body offers, by name. It is built once
// and read by every transport; it is safe for concurrent use.
type Table struct {
	byName map[string]*Entry
}

// NewTable makes a table of entries. A name used twice, an entry without
// a kind or a least principal, one whose types have no JSON Schema, and
// one whose tool does not follow from it (see checkTool) are refused.
func NewTable(entries ...*Entry) (*Table, error) {
	t := &Table{byName: map[string]*Entry{}}
	tools := map[string]string{}
	for _, e := range entries {
		switch {
		case e.Name == "":
			return nil, errors.New("awareness: an operation without a name")
		case t.byName[e.Name] != nil:
			return nil, fmt.Errorf("awareness: operation %s defined twice", e.Name)
		case e.Kind != Observe && e.Kind != Interact && e.Kind != Admin:
			return nil, fmt.Errorf("awareness: operation %s: kind %q", e.Name, e.Kind)
		case len(e.Least.Kinds) == 0 || e.Least.Trust < ledger.Low:
			return nil, fmt.Errorf("awareness: operation %s admits nobody (least %v)", e.Name, e.Least)
		}
		// The schemas are derived here to refuse types that have none, and
		// again when asked for: kept from the start, every operation's were
		// most of the table's memory, and the body needs only the inputs
		// of an agent's tools, once an agent comes.
		for _, t := range []reflect.Type{e.In, e.Out} {
			if _, err := schemaOf(t); err != nil {
				return nil, fmt.Errorf("awareness: operation %s: %w", e.Name, err)
			}
		}
		e.inSchema, e.outSchema, e.outJSON = lazySchema(e.In), lazySchema(e.Out), lazySchemaJSON(e.Out)
		e.Streams, e.Media = e.Out.Implements(streamingType), e.Out.Implements(mediaType)
		if err := checkTool(e); err != nil {
			return nil, fmt.Errorf("awareness: operation %s: %w", e.Name, err)
		}
		if n := e.Tool.Name; n != "" {
			if tools[n] != "" {
				return nil, fmt.Errorf("awareness: operations %s and %s are both tool %s", tools[n], e.Name, n)
			}
			tools[n] = e.Name
		}
		t.byName[e.Name] = e
	}
	return t, nil
}

// checkTool refuses an operation whose tool does not follow from it: a
// tool is an operation's whose least admits agents and that does not
// stream, or streams media; a named one is ReadOnly exactly when its kind is Observe, and
// never Destructive then. (An operation that admits agents without a
// tool is offered to none: the body's own each name one, which its
// tests check.)
func checkTool(e *Entry) error {
	tl := e.Tool
	agents := slices.Contains(e.Least.Kinds, act.AgentSession) && (!e.Streams || e.Media)
	switch {
	case tl.Name != "" && tl.PerCapability:
		return fmt.Errorf("tool %s: a name of its own or one per capability, not both", tl.Name)
	case !agents && tl != Tool{}:
		return fmt.Errorf("tool %+v: no agent is offered it (least %v, streams %v)", tl, e.Least, e.Streams)
	case tl.Name != "" && tl.ReadOnly != (e.Kind == Observe):
		return fmt.Errorf("tool %s: read-only %v, for kind %s", tl.Name, tl.ReadOnly, e.Kind)
	case tl.ReadOnly && tl.Destructive:
		return fmt.Errorf("tool %s: read-only and destructive", tl.Name)
	case e.Resource.URI != "" && (tl.Name == "" || e.Kind != Observe || e.In != reflect.TypeFor[None]()):
		return fmt.Errorf("resource %s: an agent's observation that takes no input, with a tool of its own", e.Resource.URI)
	case tl.PerCapability && (tl.ReadOnly || tl.Destructive || tl.Idempotent):
		return errors.New("tools per capability: their annotations are each capability's")
	}
	return nil
}

// Lookup finds an operation by name.
func (t *Table) Lookup(name string) (*Entry, bool) {
	e, ok := t.byName[name]
	return e, ok
}

// Entries lists the operations by name.
func (t *Table) Entries() []*Entry {
	out := make([]*Entry, 0, len(t.byName))
	for _, e := range t.byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tools are the operations agent principal p is offered as tools of
// their own, by tool name: those with a Tool name whose least admits p (a
// streaming operation has none). The operation offered as one tool per
// capability (Tool.PerCapability) is not among them: the transport makes
// those, when its least admits p.
func (t *Table) Tools(p act.Principal) []*Entry {
	return t.offered(p, func(e *Entry) string { return e.Tool.Name })
}

// Resources are the operations agent principal p is offered as MCP
// resources, by URI: those with a Resource URI whose least admits p.
func (t *Table) Resources(p act.Principal) []*Entry {
	return t.offered(p, func(e *Entry) string { return e.Resource.URI })
}

// offered are the operations whose least admits p and whose name(e) is
// set, by that name.
func (t *Table) offered(p act.Principal, name func(*Entry) string) []*Entry {
	var out []*Entry
	for _, e := range t.byName {
		if name(e) != "" && e.Least.Admits(p) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

// enumSchemas are the schemas of the types that marshal as names.
var enumSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[ledger.Level]():     {Type: "string", Enum: []any{"off", "low", "medium", "high", "max"}},
	reflect.TypeFor[act.Risk]():         {Type: "string", Enum: []any{"R0", "R1", "R2", "R3"}},
	reflect.TypeFor[body.Degradation](): {Type: "string", Enum: []any{"normal", "constrained", "degraded", "critical"}},
	reflect.TypeFor[ledger.UUID]():      {Type: "string"},
	reflect.TypeFor[any]():              {Description: "any JSON value"}, // not {}, which is written as the bare schema true that some clients refuse
}

// schemaOf is the JSON Schema of an operation's input or output type.
func schemaOf(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: enumSchemas})
	if err != nil {
		return nil, err
	}
	nullMaps(s)
	return s, nil
}

// SchemaFor is the JSON Schema of T as the table derives its operations'
// (the body's types that marshal as names are strings of those names, a
// map is an object or null): for a transport's own types beside them (an
// agent's drain). It is derived anew at every call.
func SchemaFor[T any]() (*jsonschema.Schema, error) { return schemaOf(reflect.TypeFor[T]()) }

// nullMaps lets every map of s be null too, as encoding/json writes a nil
// map: jsonschema.ForType says so of a slice, not of a map. A map's
// schema is the one object schema whose additionalProperties is not
// false (a struct's is).
func nullMaps(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if a := s.AdditionalProperties; s.Type == "object" && a != nil && a.Not == nil {
		s.Type, s.Types = "", []string{"null", "object"}
	}
	for _, p := range s.Properties {
		nullMaps(p)
	}
	nullMaps(s.Items)
	nullMaps(s.AdditionalProperties)
}

// lazySchema is t's schema, derived when first asked for and kept; t is a
// type NewTable derived one for.
func lazySchema(t reflect.Type) func() *jsonschema.Schema {
	return sync.OnceValue(func() *jsonschema.Schema {
		s, err := schemaOf(t)
		if err != nil {
			panic(fmt.Sprintf("awareness: the schema of %v, derived before: %v", t, err))
		}
		return s
	})
}

// lazySchemaJSON is the JSON of t's schema, derived when first asked for
// and kept without the schema; t is a type NewTable derived one for.
func lazySchemaJSON(t reflect.Type) func() json.RawMessage {
	return sync.OnceValue(func() json.RawMessage {
		s, err := schemaOf(t)
		if err == nil {
			var b []byte
			if b, err = json.Marshal(s); err == nil {
				return b
			}
		}
		panic(fmt.Sprintf("awareness: the schema of %v, derived before: %v", t, err))
	})
}
