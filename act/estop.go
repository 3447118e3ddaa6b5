package act

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// The e-stop is a monitor and an interlock: the button must also cut
// actuator power in hardware. In software it is the first thing the body
// obeys. Its line is wired normally closed, so an open contact or a broken
// wire reads as stop. On a stop, in this order and on a path that takes no
// lock shared with the ledger, MQTT or the agent:
//
//  1. latch: from here on every request is refused with estop_latched;
//  2. drive every output the body owns to its safe level (Halt, which also
//     latches each line against a racing write) and read each back, in as
//     few calls as the drivers allow (hal.HaltSet: a GPIO chip's outputs,
//     held in one request, take one write and one read); then
//     silence every speaker (Halt drops what is queued and latches it
//     until the reset; it takes only the speaker's own locks);
//  3. cancel the running action and every queued one (reason estop);
//  4. revoke every lease;
//
// and only then hand a record of the trip (edge time, read-backs, what was
// cancelled) to whoever writes the ledger. The latch holds until a local,
// deliberate reset with a healthy line: a reset button pressed 350 ms to
// 2 s and accepted on its release, or `tobe-body estop reset` by a local
// administrator. A reset permits actions again; it starts nothing.
//
// The trip path must not wait for the Go scheduler. Where the line's
// driver offers a hal.Tripwire (the GPIO character device, built with
// cgo), Run arms it: a thread of the driver's own, real-time where the
// body may, waits in the kernel on the line and drives every output it
// covers safe and reads it back before any Go code runs; steps 2 then
// happens first, and the rest follows on the edge's delivery. Without one
// (fake pins, the sim board, a build without cgo) the body keeps CPU-heavy
// work (motion detection) below GOMAXPROCS (sense.CPU), so a P is free
// for the e-stop's goroutine when its edge arrives. act's lab test
// measures both against a bare reader.

// Canceller cancels actions: the runner. CancelAll must not block on the
// ledger, MQTT or the agent; it returns the ids of what it cancelled.
type Canceller interface {
	CancelAll(reason Reason) []string
}

// LeaseRevoker drops every lease (the lease table).
type LeaseRevoker interface {
	RevokeAll(reason Reason) int
}

// EStopConfig is the e-stop's wiring, from the board profile.
type EStopConfig struct {
	Main     hal.LineIn
	MainStop hal.Level // the level that means stop
	// Second is an optional second channel; either channel at its stop
	// level trips. Disagreeing longer than Discrepancy is a wiring fault,
	// which keeps the latch until both agree again and a reset.
	Second      hal.LineIn
	SecondStop  hal.Level
	Discrepancy time.Duration
	// Reset is the optional local reset button, Active when pressed,
	// accepted on release after a press of MinPress..MaxPress.
	Reset              hal.LineIn
	ResetActive        hal.Level
	MinPress, MaxPress time.Duration
	// Outputs are every output the body owns.
	Outputs []hal.LineOut
	// Speakers are every speaker the body owns: a trip silences them
	// (Halt drops what is queued and latches) once the outputs are safe,
	// and a reset rearms them.
	Speakers []hal.AudioPlayback
	// Now reads the monotonic clock (tests replace it).
	Now func() hal.Mono
}

// Defaults of the reset press and the discrepancy window.
const (
	DefaultMinPress    = 350 * time.Millisecond
	DefaultMaxPress    = 2 * time.Second
	DefaultDiscrepancy = 200 * time.Millisecond
)

// OutputState is one output's read-back after a trip.
type OutputState struct {
	Name     string `cbor:"name" json:"name"`
	Safe     string `cbor:"safe" json:"safe"`
	ReadBack string `cbor:"read_back" json:"read_back"` // "low", "high", or "unreadable"
	Err      string `cbor:"error,omitempty" json:"error,omitempty"`
}

// Trip is what a stop did, for the ledger.
type Trip struct {
	Cause string `cbor:"cause" json:"cause"`
	// Edge is the line's edge time (the kernel's), or when the stop was
	// asked for; Safe is when every output was read back at its level.
	Edge      hal.Mono      `cbor:"-" json:"-"`
	Safe      hal.Mono      `cbor:"-" json:"-"`
	LatencyNS int64         `cbor:"latency_ns" json:"latency_ns"`
	Outputs   []OutputState `cbor:"outputs" json:"outputs"`
	AllSafe   bool          `cbor:"all_safe" json:"all_safe"`
	Cancelled []string      `cbor:"cancelled,omitempty" json:"cancelled,omitempty"`
	Leases    int           `cbor:"leases_revoked" json:"leases_revoked"`
	// ByDriver counts the outputs the line's tripwire halted before the
	// edge reached Go.
	ByDriver int `cbor:"by_driver,omitempty" json:"by_driver,omitempty"`
	// Already is true when the latch was set before this stop: outputs
	// were made safe again, nothing new was latched.
	Already bool `cbor:"already,omitempty" json:"already,omitempty"`
	// Attention is how the stop is published: "max", the highest, to the
	// home server and every agent, before anything else waiting.
	Attention string `cbor:"attention" json:"attention"`
	// Folded counts the stops while latched before this one that were
	// not recorded one by one (see StopAgainEvery).
	Folded int `cbor:"folded,omitempty" json:"folded,omitempty"`
	// By, Reason, Key and Note are the asker's when a principal asked for
	// the stop (TripAsked): its subject, why, the idempotency key that
	// makes a repeat of its request return this stop, and a note for the
	// record.
	By     string `cbor:"by,omitempty" json:"by,omitempty"`
	Reason string `cbor:"reason,omitempty" json:"reason,omitempty"`
	Key    string `cbor:"key,omitempty" json:"idempotency_key,omitempty"`
	Note   string `cbor:"note,omitempty" json:"note,omitempty"`
	// Recorded tells whether this stop has a record of its own in the
	// ledger; false: it was folded into the next (StopAgainEvery).
	Recorded bool `cbor:"-" json:"recorded"`
}

// Ask is a stop a principal asked for: who (its subject), why, its
// idempotency key and a note, each already bounded and cleaned by the
// caller (a stop is never refused for what its asker wrote).
type Ask struct {
	By, Reason, Key, Note string
}

// StopAgainEvery bounds the records of stops while latched: every stop
// is obeyed at once, but one that changes nothing (the latch was set) is
// recorded only when none was in the StopAgainEvery before it; the
// next one recorded, or the reset, says how many were folded. A caller
// that asks to stop again and again (any principal may) cannot fill the
// disk with records of it.
const StopAgainEvery = time.Minute

// KeyedStopsAgain is how many stops with an idempotency key are recorded
// one by one in a StopAgainEvery while latched, beyond the fold: a key is
// found again in its record (a repeat of the request, even after a
// restart, returns that stop and stops nothing), so the record is the
// key's promise. Past it they fold like any other, and their keys are
// remembered only by whoever asked.
const KeyedStopsAgain = 5

// Record is something the e-stop did or refused, for the ledger. Type is
// the event type (estop.tripped, estop.reset, estop.reset_refused,
// estop.wiring_fault, estop.checked); At is when.
type Record struct {
	Type    string
	At      hal.Mono
	Payload any
}

// ResetRefused is the payload of estop.reset_refused.
type ResetRefused struct {
	By     string `cbor:"by" json:"by"`
	Reason Reason `cbor:"reason" json:"reason"`
	Detail string `cbor:"detail" json:"detail"`
}

// ResetDone is the payload of estop.reset.
type ResetDone struct {
	By      string `cbor:"by" json:"by"`
	PressMS int64  `cbor:"press_ms,omitempty" json:"press_ms,omitempty"`
	// StopsFolded counts the stops while latched since the last one
	// recorded, which were obeyed and not recorded one by one.
	StopsFolded int `cbor:"stops_folded,omitempty" json:"stops_folded,omitempty"`
}

// Check is the payload of estop.checked, the wiring check at start.
type Check struct {
	Main     string `cbor:"main" json:"main"` // "ok", "stop", "unreadable: ..."
	Second   string `cbor:"second,omitempty" json:"second,omitempty"`
	Reset    string `cbor:"reset,omitempty" json:"reset,omitempty"`
	Verified bool   `cbor:"verified" json:"verified"`
	Latched  bool   `cbor:"latched" json:"latched"`
	Why      string `cbor:"why,omitempty" json:"why,omitempty"`
}

// EStopStatus is the e-stop's state now.
type EStopStatus struct {
	Latched  bool   `json:"latched"`
	Why      string `json:"why,omitempty"`
	Verified bool   `json:"verified"` // the line could be read at start and since
	Main     string `json:"main"`
	Second   string `json:"second,omitempty"`
	Fault    string `json:"wiring_fault,omitempty"`
	Trips    uint64 `json:"trips"`
	// Path says what halts the outputs on an edge: the driver's tripwire
	// thread (and how it is scheduled), or the e-stop's goroutine.
	Path string `json:"path,omitempty"`
}

// String says where the e-stop is, on one line: "armed (main closed)",
// or "LATCHED: why (main open, second closed) WIRING FAULT: ...".
func (st EStopStatus) String() string {
	var b strings.Builder
	if st.Latched {
		b.WriteString("LATCHED: " + st.Why)
	} else {
		b.WriteString("armed")
	}
	fmt.Fprintf(&b, " (main %s", st.Main)
	if st.Second != "" {
		fmt.Fprintf(&b, ", second %s", st.Second)
	}
	b.WriteString(")")
	if st.Fault != "" {
		fmt.Fprintf(&b, " WIRING FAULT: %s", st.Fault)
	}
	return b.String()
}

// ErrResetRefused is wrapped by Reset's refusals.
var ErrResetRefused = errors.New("act: e-stop reset refused")

// EStop watches the e-stop line and latches. Make it with NewEStop, set
// the runner and the leases, then Run it.
type EStop struct {
	cfg    EStopConfig
	cancel Canceller
	leases LeaseRevoker

	latched  atomic.Bool
	verified atomic.Bool
	trips    atomic.Uint64
	stops    atomic.Uint64 // every Trip begun, counted first: a reset under way sees it

	// tripMu serialises trips with each other and with a reset; it is the
	// e-stop's own and is never held while anything else is waited on.
	tripMu sync.Mutex
	why    string
	// againAt is when the last stop while latched was recorded, and
	// againFolded how many came since without a record; under tripMu.
	againAt     hal.Mono
	againFolded int
	againKeyed  int             // keyed stops recorded since againAt (KeyedStopsAgain)
	covered     map[string]bool // outputs a line's tripwire halts
	path        string
	spare       []OutputState // the next trip's read-backs, allocated ahead
	// all halts every output, rest those no tripwire covers, each in as
	// few calls as their drivers allow (hal.HaltSet); made ahead, with
	// their reports, so a trip allocates nothing before the outputs are
	// safe.
	all, rest       *hal.HaltSet
	allRep, restRep []hal.HaltedOutput

	// mu guards the lines' last levels and the wiring fault.
	mu         sync.Mutex
	mainStop   bool
	secondStop bool
	disagreeAt hal.Mono // when the channels began to disagree; 0: they agree
	fault      string

	recMu   sync.Mutex
	recs    []Record
	recWake chan struct{}
}

// NewEStop makes an e-stop from its wiring. It may Run before the runner
// exists: SetRunner gives it what to cancel and revoke later, and a trip
// before that cancels nothing, because nothing runs yet.
func NewEStop(cfg EStopConfig) (*EStop, error) {
	if cfg.Main == nil {
		return nil, fmt.Errorf("act: e-stop: no main line")
	}
	if cfg.Now == nil {
		cfg.Now = hal.MonoNow
	}
	if cfg.MinPress == 0 {
		cfg.MinPress = DefaultMinPress
	}
	if cfg.MaxPress == 0 {
		cfg.MaxPress = DefaultMaxPress
	}
	if cfg.Discrepancy == 0 {
		cfg.Discrepancy = DefaultDiscrepancy
	}
	if cfg.MinPress >= cfg.MaxPress {
		return nil, fmt.Errorf("act: e-stop: reset press %v..%v is empty", cfg.MinPress, cfg.MaxPress)
	}
	e := &EStop{cfg: cfg, recWake: make(chan struct{}, 1)}
	e.all = hal.NewHaltSet(cfg.Outputs)
	e.allRep = make([]hal.HaltedOutput, len(cfg.Outputs))
	e.rest, e.restRep = e.all, e.allRep
	return e, nil
}

// SetRunner gives the e-stop what it cancels and revokes on a trip.
func (e *EStop) SetRunner(c Canceller, l LeaseRevoker) {
	e.tripMu.Lock()
	e.cancel, e.leases = c, l
	e.tripMu.Unlock()
}

// Latched tells whether the latch is set. It reads one atomic: the
// runner calls it on every request.
func (e *EStop) Latched() bool { return e.latched.Load() }

// Verified tells whether the e-stop line could be read: a body whose line
// cannot be read permits nothing above R0.
func (e *EStop) Verified() bool { return e.verified.Load() }

// Status says where the e-stop is.
func (e *EStop) Status() EStopStatus {
	e.tripMu.Lock()
	why := e.why
	e.tripMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tripMu.Lock()
	path := e.path
	e.tripMu.Unlock()
	s := EStopStatus{Latched: e.latched.Load(), Verified: e.verified.Load(), Why: why, Main: stopWord(e.mainStop), Fault: e.fault, Trips: e.trips.Load(), Path: path}
	if e.cfg.Second != nil {
		s.Second = stopWord(e.secondStop)
	}
	return s
}

func stopWord(stop bool) string {
	if stop {
		return "stop"
	}
	return "ok"
}

func levelName(l hal.Level) string {
	if l == hal.High {
		return "high"
	}
	return "low"
}

// Trip stops the body: see the package's e-stop comment for the order.
// cause says why ("line_open", "second_open", "line_unreadable",
// "requested by agent:pi", ...) and edge is when it happened (the line's
// edge time, or now). It returns what it did; the same is queued for the
// ledger.
func (e *EStop) Trip(cause string, edge hal.Mono) Trip { return e.trip(cause, Ask{}, edge, nil) }

// TripNow is Trip asked for now: by a person or a caller, not an edge.
func (e *EStop) TripNow(cause string) Trip { return e.trip(cause, Ask{}, hal.MonoNow(), nil) }

// TripAsked is TripNow for a principal's request: the cause is
// "requested by SUBJECT" and its reason, and the record carries the ask.
func (e *EStop) TripAsked(a Ask) Trip {
	cause := "requested by " + a.By
	if a.Reason != "" {
		cause += ": " + a.Reason
	}
	return e.trip(cause, a, hal.MonoNow(), nil)
}

// trip is Trip with what a line's tripwire already did (rep, or nil): the
// outputs it covered are not driven again.
func (e *EStop) trip(cause string, ask Ask, edge hal.Mono, rep *hal.HaltReport) Trip {
	e.stops.Add(1)
	already := e.latched.Swap(true) // 1. latch: new requests are refused from here
	e.tripMu.Lock()
	// A reset that held tripMu may have cleared the latch since: set it
	// again; this stop came after that reset.
	already = e.latched.Swap(true) && already
	// Nothing is allocated before the outputs are safe: an allocation
	// while the garbage collector runs may be made to help it first.
	if cap(e.spare) < len(e.cfg.Outputs) {
		e.spare = make([]OutputState, 0, len(e.cfg.Outputs))
	}
	t := Trip{Cause: cause, Edge: edge, Already: already, AllSafe: true, Outputs: e.spare[:0], Attention: "max",
		By: ask.By, Reason: ask.Reason, Key: ask.Key, Note: ask.Note}
	// 2. every output safe, and read back: those a tripwire halted
	// already are in rep; the others are halted here, a driver's call per
	// group of them (one write and one read per request of a GPIO chip).
	set, setRep := e.all, e.allRep
	if rep != nil {
		set, setRep = e.rest, e.restRep
	}
	t.Safe = 0
	if len(setRep) > 0 {
		set.Halt(setRep)
		t.Safe = e.cfg.Now()
	}
	var done map[string]hal.HaltedOutput // made once every output is safe
	if rep != nil {
		done = make(map[string]hal.HaltedOutput, len(rep.Outputs))
		for _, h := range rep.Outputs {
			if e.covered[h.Name] {
				done[h.Name] = h
			}
		}
	}
	j := 0 // the next of set's outputs
	for _, o := range e.cfg.Outputs {
		var h hal.HaltedOutput
		if d, ok := done[o.Name()]; ok { // halted by the tripwire already
			h = d
			t.ByDriver++
		} else if j < len(setRep) && set.Outputs()[j] == o {
			h = setRep[j]
			j++
		} else { // covered, but not in the tripwire's report
			h = hal.HaltOne(o)
			t.Safe = e.cfg.Now()
		}
		st := OutputState{Name: o.Name(), Safe: levelName(o.Safe()), ReadBack: "unreadable"}
		if h.Err != nil {
			st.Err, t.AllSafe = h.Err.Error(), false
		} else {
			st.ReadBack = levelName(h.ReadBack)
			t.AllSafe = t.AllSafe && h.ReadBack == o.Safe()
		}
		t.Outputs = append(t.Outputs, st)
	}
	if rep != nil && t.ByDriver > 0 && (t.Safe == 0 || rep.Safe > t.Safe) {
		t.Safe = rep.Safe
	}
	if t.Safe == 0 {
		t.Safe = e.cfg.Now()
	}
	// The next trip's read-backs, now that this one's outputs are safe.
	e.spare = make([]OutputState, 0, len(e.cfg.Outputs))
	// Silence: a sound harms less than an output, so it comes after them.
	for _, sp := range e.cfg.Speakers {
		sp.Halt()
	}
	if c := e.cancel; c != nil { // 3. cancel the running and the queued
		t.Cancelled = c.CancelAll(ReasonEStopLatched)
	}
	if l := e.leases; l != nil { // 4. revoke the leases
		t.Leases = l.RevokeAll(ReasonEStopLatched)
	}
	recorded := true
	if !already {
		e.why = cause
		e.trips.Add(1)
		e.againAt, e.againFolded, e.againKeyed = 0, 0, 0
	} else if e.againAt != 0 && t.Safe.Sub(e.againAt) < StopAgainEvery {
		if ask.Key != "" && e.againKeyed < KeyedStopsAgain {
			e.againKeyed++ // recorded, and the window goes on
		} else {
			e.againFolded++
			recorded = false
		}
	} else {
		t.Folded, e.againAt, e.againFolded, e.againKeyed = e.againFolded, t.Safe, 0, 0
	}
	t.Recorded = recorded
	if edge != 0 && t.Safe >= edge {
		t.LatencyNS = int64(t.Safe.Sub(edge))
	}
	typ := "estop.tripped"
	if already {
		typ = "estop.stop_again"
	}
	if recorded {
		// Queued under tripMu (record only appends under recMu), so the
		// records are in the order the latch saw the stops: two channels
		// opening at once give the trip, then the stop again.
		e.record(Record{Type: typ, At: edge, Payload: t})
	}
	e.tripMu.Unlock()
	return t
}

// EventEStopReset is the type of the event a reset of the latch records.
const EventEStopReset = "estop.reset"

// LatchAtStart sets the latch before Run (the daemon was latched when it
// stopped, or its ledger cannot be read): a trip with that cause, so
// outputs are halted and read back, and it is recorded like any other.
func (e *EStop) LatchAtStart(why string) {
	e.Trip("latched at start: "+why, e.cfg.Now())
}

// Reset clears the latch for a local administrator (the admin socket) or
// the reset button. Anyone else is refused with reset_not_local; a line
// still at stop, a wiring fault, or an unverified line refuse too. Every
// refusal is recorded. Reset starts nothing: outputs stay at their safe
// levels until an action drives them.
func (e *EStop) Reset(by Principal) error {
	if by.Kind != LocalAdmin {
		return e.refuseReset(by.Subject, ReasonResetNotLocal, "only a local, deliberate act resets the e-stop: the reset button or `tobe-body estop reset` on the device")
	}
	return e.reset(by.Subject, 0)
}

func (e *EStop) refuseReset(by string, r Reason, detail string) error {
	e.record(Record{Type: "estop.reset_refused", At: e.cfg.Now(), Payload: ResetRefused{By: by, Reason: r, Detail: detail}})
	return &Refusal{Reason: r, Detail: detail, Err: ErrResetRefused}
}

// reset clears the latch if the lines allow it, and no stop began since
// it read them.
func (e *EStop) reset(by string, press time.Duration) error {
	stops := e.stops.Load()
	if err := e.readLines(); err != nil {
		return e.refuseReset(by, ReasonEStopUnverified, "the e-stop line cannot be read: "+err.Error())
	}
	e.mu.Lock()
	mainStop, secondStop, fault := e.mainStop, e.secondStop, e.fault
	e.mu.Unlock()
	switch {
	case mainStop || secondStop:
		return e.refuseReset(by, ReasonEStopLatched, "the e-stop line still says stop")
	case fault != "":
		return e.refuseReset(by, ReasonEStopLatched, "wiring fault: "+fault)
	}
	e.tripMu.Lock()
	if e.stops.Load() != stops {
		e.tripMu.Unlock()
		return e.refuseReset(by, ReasonEStopLatched, "the e-stop stopped again while the reset was checked")
	}
	wasLatched := e.latched.Load()
	if wasLatched {
		for _, o := range e.cfg.Outputs {
			o.Rearm() // permits writes again; the line stays at its safe level
		}
		for _, sp := range e.cfg.Speakers {
			sp.Rearm() // permits sounds again; nothing plays until an action asks
		}
		e.why = ""
		e.latched.Store(false)
	}
	folded := e.againFolded
	e.againAt, e.againFolded, e.againKeyed = 0, 0, 0
	e.tripMu.Unlock()
	if !wasLatched {
		return nil
	}
	e.record(Record{Type: EventEStopReset, At: e.cfg.Now(), Payload: ResetDone{By: by, PressMS: press.Milliseconds(), StopsFolded: folded}})
	return nil
}

// readLines reads the lines' levels now.
func (e *EStop) readLines() error {
	l, err := e.cfg.Main.Read()
	if err != nil {
		return fmt.Errorf("main line %s: %w", e.cfg.Main.Name(), err)
	}
	e.mu.Lock()
	e.mainStop = l == e.cfg.MainStop
	e.mu.Unlock()
	if e.cfg.Second != nil {
		l, err := e.cfg.Second.Read()
		if err != nil {
			return fmt.Errorf("second line %s: %w", e.cfg.Second.Name(), err)
		}
		e.mu.Lock()
		e.secondStop = l == e.cfg.SecondStop
		e.mu.Unlock()
	}
	return nil
}

func (e *EStop) record(r Record) {
	e.recMu.Lock()
	e.recs = append(e.recs, r)
	e.recMu.Unlock()
	select {
	case e.recWake <- struct{}{}:
	default:
	}
}

// Records waits for what the e-stop did since the last call, or ctx.
func (e *EStop) Records(ctx context.Context) ([]Record, error) {
	for {
		e.recMu.Lock()
		recs := e.recs
		e.recs = nil
		e.recMu.Unlock()
		if len(recs) > 0 {
			return recs, nil
		}
		select {
		case <-e.recWake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Check reads the wiring before any action is permitted: the line must be
// readable and healthy, and a second channel agree. It trips when the line
// says stop or cannot be read, and records the result.
func (e *EStop) Check() Check {
	c := Check{Main: "ok"}
	now := e.cfg.Now()
	err := e.readLines()
	e.mu.Lock()
	mainStop, secondStop := e.mainStop, e.secondStop
	e.mu.Unlock()
	switch {
	case err != nil:
		c.Main = "unreadable: " + err.Error()
		c.Why = "the e-stop line cannot be read"
	case mainStop:
		c.Main = "stop"
		c.Why = "the e-stop line is open"
	}
	if e.cfg.Second != nil && err == nil {
		c.Second = stopWord(secondStop)
		if secondStop && c.Why == "" {
			c.Why = "the second e-stop channel is open"
		}
	}
	if e.cfg.Reset != nil {
		c.Reset = "released"
		if l, rerr := e.cfg.Reset.Read(); rerr != nil {
			c.Reset = "unreadable: " + rerr.Error()
		} else if l == e.cfg.ResetActive {
			c.Reset = "held at start: ignored until released"
		}
	}
	c.Verified = err == nil
	e.verified.Store(c.Verified)
	if c.Why != "" {
		cause := "line_open"
		if err != nil {
			cause = "line_unreadable"
		} else if !mainStop {
			cause = "second_open"
		}
		e.Trip(cause, now)
	}
	c.Latched = e.latched.Load()
	e.discrepancy() // two channels that already disagree start the window now
	e.record(Record{Type: "estop.checked", At: now, Payload: c})
	return c
}

// arm arms the stop lines' tripwires, where their drivers have one, over
// every output.
func (e *EStop) arm() {
	covered := map[string]bool{}
	var paths []string
	for _, l := range []struct {
		name string
		line hal.LineIn
		stop hal.Level
	}{{"main", e.cfg.Main, e.cfg.MainStop}, {"second", e.cfg.Second, e.cfg.SecondStop}} {
		tw, ok := l.line.(hal.Tripwire)
		if !ok {
			continue
		}
		outs, err := tw.ArmTrip(l.stop, e.cfg.Outputs)
		if err != nil {
			paths = append(paths, fmt.Sprintf("%s: no tripwire (%v)", l.name, err))
			continue
		}
		for _, o := range outs {
			covered[o.Name()] = true
		}
		paths = append(paths, fmt.Sprintf("%s: tripwire thread, %s, halts %d of %d outputs", l.name, tw.TripThread(), len(outs), len(e.cfg.Outputs)))
	}
	path := "the e-stop's goroutine halts the outputs"
	if len(paths) > 0 {
		path = strings.Join(paths, "; ")
	}
	var rest []hal.LineOut
	for _, o := range e.cfg.Outputs {
		if !covered[o.Name()] {
			rest = append(rest, o)
		}
	}
	e.tripMu.Lock()
	e.covered, e.path = covered, path
	e.rest, e.restRep = hal.NewHaltSet(rest), make([]hal.HaltedOutput, len(rest))
	e.tripMu.Unlock()
}

// Alive answers when the e-stop's locks are free: the channel returned
// is closed once the trip path, the lines' state and the records could
// each be taken. A trip or a watcher that holds one for ever (a
// deadlock) leaves it open, and the daemon's watchdog stops its pings.
// Ask again only after an answer: each question waits in a goroutine.
func (e *EStop) Alive() <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for _, m := range []*sync.Mutex{&e.tripMu, &e.mu, &e.recMu} {
			m.Lock()
			//lint:ignore SA2001 taken only to see that it can be
			m.Unlock()
		}
		close(c)
	}()
	return c
}

// Run watches the lines until ctx is done. Call Check first.
func (e *EStop) Run(ctx context.Context) error {
	e.arm()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	watch := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	watch(func(ctx context.Context) error { return e.watchStop(ctx, e.cfg.Main, e.cfg.MainStop, true) })
	if e.cfg.Second != nil {
		watch(func(ctx context.Context) error { return e.watchStop(ctx, e.cfg.Second, e.cfg.SecondStop, false) })
	}
	if e.cfg.Reset != nil {
		watch(e.watchReset)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// watchStop trips on every edge to the stop level (and on a read error of
// the line, which cannot be told from a broken wire).
func (e *EStop) watchStop(ctx context.Context, line hal.LineIn, stop hal.Level, main bool) error {
	cause := "second_open"
	if main {
		cause = "line_open"
	}
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if d := e.discrepancyDeadline(); d > 0 {
			wctx, cancel = context.WithTimeout(ctx, d)
		}
		ev, err := line.WaitForEdge(wctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, hal.ErrHalted):
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			e.discrepancy()
			continue
		default:
			e.verified.Store(false)
			e.Trip("line_unreadable: "+err.Error(), e.cfg.Now())
			return fmt.Errorf("act: e-stop: %s: %w", line.Name(), err)
		}
		isStop := ev.Level == stop
		if isStop {
			e.trip(cause, Ask{}, ev.Time, ev.Halted) // first: nothing else before the outputs are safe
		}
		e.mu.Lock()
		if main {
			e.mainStop = isStop
		} else {
			e.secondStop = isStop
		}
		e.mu.Unlock()
		e.discrepancy()
	}
}

// discrepancyDeadline is how long until the channels' disagreement
// becomes a wiring fault (0: they agree, there is no second channel, or
// the fault is known).
func (e *EStop) discrepancyDeadline() time.Duration {
	if e.cfg.Second == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disagreeAt == 0 || e.fault != "" {
		return 0
	}
	return max(time.Millisecond, e.disagreeAt.Add(e.cfg.Discrepancy).Sub(e.cfg.Now()))
}

// discrepancy notes when the two channels began to disagree, and records
// a wiring fault when they disagreed for longer than the window. The
// fault clears when they agree again; the latch stays until a reset.
func (e *EStop) discrepancy() {
	if e.cfg.Second == nil {
		return
	}
	now := e.cfg.Now()
	e.mu.Lock()
	var rec *Record
	switch {
	case e.mainStop == e.secondStop:
		if e.fault != "" {
			rec = &Record{Type: "estop.wiring_ok", At: now, Payload: map[string]string{"was": e.fault}}
		}
		e.disagreeAt, e.fault = 0, ""
	case e.disagreeAt == 0:
		e.disagreeAt = now
	case e.fault == "" && now.Sub(e.disagreeAt) >= e.cfg.Discrepancy:
		e.fault = fmt.Sprintf("the channels disagree for more than %v (main %s, second %s)", e.cfg.Discrepancy, stopWord(e.mainStop), stopWord(e.secondStop))
		rec = &Record{Type: "estop.wiring_fault", At: now, Payload: map[string]string{"fault": e.fault}}
	}
	e.mu.Unlock()
	if rec != nil {
		e.record(*rec)
	}
}

// watchReset accepts a press of MinPress..MaxPress on its release. A
// press already held when watching began is ignored.
func (e *EStop) watchReset(ctx context.Context) error {
	line := e.cfg.Reset
	var pressedAt hal.Mono
	held := false
	if l, err := line.Read(); err == nil && l == e.cfg.ResetActive {
		held = true // held at start: an error, not a reset
	}
	for {
		ev, err := line.WaitForEdge(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, hal.ErrHalted):
			return nil
		default:
			return fmt.Errorf("act: e-stop reset %s: %w", line.Name(), err)
		}
		if ev.Level == e.cfg.ResetActive {
			pressedAt = ev.Time
			continue
		}
		// Released.
		if held || pressedAt == 0 {
			held, pressedAt = false, 0
			e.refuseReset("reset button", ReasonEStopLatched, "the reset button was held when the body started; press it again")
			continue
		}
		press := ev.Time.Sub(pressedAt)
		pressedAt = 0
		if !e.latched.Load() {
			continue
		}
		if press < e.cfg.MinPress || press > e.cfg.MaxPress {
			e.refuseReset("reset button", ReasonEStopLatched, fmt.Sprintf("a press of %v; a reset is a press of %v to %v", press.Round(time.Millisecond), e.cfg.MinPress, e.cfg.MaxPress))
			continue
		}
		e.reset("reset button", press)
	}
}
