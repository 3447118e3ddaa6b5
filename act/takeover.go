package act

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// The people's hold records in the ledger; their class is audit.
const (
	// EventHumanTakeover records that a person's control took a resource
	// over (or renewed the hold, cancelling what ran on it).
	EventHumanTakeover = "lease.human_takeover"
	// EventHumanReleased records that the hold on a resource ended.
	EventHumanReleased = "lease.human_released"
)

// humanTakeover is the payload of lease.human_takeover.
type humanTakeover struct {
	Resource string  `cbor:"resource"`
	Control  string  `cbor:"control"`
	Epoch    uint64  `cbor:"epoch"`
	End      HoldEnd `cbor:"end"`
	// Cancelled are the actions the takeover cancelled on the resource.
	Cancelled []string `cbor:"cancelled"`
	// Renewed: a press while the hold was in force.
	Renewed bool `cbor:"renewed"`
}

// humanReleased is the payload of lease.human_released.
type humanReleased struct {
	Resource string `cbor:"resource"`
	Control  string `cbor:"control"`
	Why      string `cbor:"why"`
}

// HoldEnd says when a person's hold on the resources of a control ends.
type HoldEnd string

// How a hold ends.
const (
	// EndOnLetGo: the hold lasts while the control is held down.
	EndOnLetGo HoldEnd = "release"
	// EndOnPressAgain: a press takes over, the next press gives back.
	EndOnPressAgain HoldEnd = "press_again"
	// EndAfter: the hold lasts HumanControl.After from the last press.
	EndAfter HoldEnd = "after"
)

// HumanControl is a control the config marks as a person's: pressing it
// takes Resources over for the person.
type HumanControl struct {
	// Control names the control as the caller reports its presses
	// ("gpio.button", or "input.keypad KEY_ENTER" for a key).
	Control   string
	Resources []string
	End       HoldEnd
	// After is how long an EndAfter hold lasts after the last press.
	After time.Duration
}

// Takeover turns presses of the people's controls into holds on their
// resources: a press moves each resource to HUMAN in the lease table
// (agent requests on it are then refused human_control, naming the
// control), cancels the agent actions running on it (a local
// administrator's go on), and records lease.human_takeover; the end of the
// hold, as the control says, frees the resources and records
// lease.human_released. Its methods are safe for concurrent use; Close
// stops its timers and waits for them.
type Takeover struct {
	leases  *LeaseTable
	runner  *Runner
	journal Journal
	now     func() time.Time
	report  func(error)

	mu       sync.Mutex // held while a hold starts or ends, its records included, so they are in order
	controls map[string]*control
	closed   bool
	timers   sync.WaitGroup
}

type control struct {
	HumanControl
	held  bool
	timer *time.Timer // EndAfter's, while held
}

// NewTakeover makes a Takeover for controls over leases, cancelling
// through r (nil: nothing to cancel) and recording to j. report receives
// errors that have no caller to return to (a record a timer's release
// could not write); nil drops them. A malformed control is an error.
func NewTakeover(controls []HumanControl, leases *LeaseTable, r *Runner, j Journal, report func(error)) (*Takeover, error) {
	if leases == nil || j == nil {
		return nil, errors.New("act: takeover needs a lease table and a journal")
	}
	if report == nil {
		report = func(error) {}
	}
	t := &Takeover{leases: leases, runner: r, journal: j, now: time.Now, report: report, controls: map[string]*control{}}
	owner := map[string]string{}
	for i, hc := range controls {
		switch {
		case hc.Control == "":
			return nil, fmt.Errorf("act: human control %d: no control", i)
		case t.controls[hc.Control] != nil:
			return nil, fmt.Errorf("act: human control %q given twice", hc.Control)
		case len(hc.Resources) == 0:
			return nil, fmt.Errorf("act: human control %q: no resources", hc.Control)
		case hc.End != EndOnLetGo && hc.End != EndOnPressAgain && hc.End != EndAfter:
			return nil, fmt.Errorf("act: human control %q: unknown end %q", hc.Control, hc.End)
		case hc.End == EndAfter && hc.After <= 0:
			return nil, fmt.Errorf("act: human control %q: an end after a time needs a positive time", hc.Control)
		}
		for _, res := range hc.Resources {
			if err := checkName(res); err != nil {
				return nil, fmt.Errorf("act: human control %q: resource: %w", hc.Control, err)
			}
			if o, ok := owner[res]; ok {
				return nil, fmt.Errorf("act: resource %s belongs to two human controls, %q and %q", res, o, hc.Control)
			}
			owner[res] = hc.Control
		}
		hc.Resources = append([]string(nil), hc.Resources...)
		t.controls[hc.Control] = &control{HumanControl: hc}
	}
	return t, nil
}

// Controls names the controls Takeover watches, sorted.
func (t *Takeover) Controls() []string {
	out := make([]string, 0, len(t.controls))
	for name := range t.controls {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Pressed reports that control was pressed. It returns false for a
// control that is not a person's; otherwise the error of writing the
// record, if any: the hold is in force whether or not its record could be
// written.
func (t *Takeover) Pressed(ctrl string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.controls[ctrl]
	if c == nil || t.closed {
		return c != nil, nil
	}
	switch {
	case c.End == EndOnPressAgain && c.held:
		return true, t.end(c, "pressed again")
	case c.End == EndAfter:
		t.arm(c)
	}
	return true, t.take(c)
}

// Resume takes the resources of ctrl over again at start, for a hold the
// ledger shows was in force when the body stopped: a restart does not
// hand a person's resources back to the agent. An EndAfter hold runs its
// whole time again from now; an EndOnLetGo hold ends at the next let-go
// (press and let go if the control was let go while the body was down).
// A control that is not a person's is ignored.
func (t *Takeover) Resume(ctrl string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.controls[ctrl]
	if c == nil || t.closed || c.held {
		return nil
	}
	if c.End == EndAfter {
		t.arm(c)
	}
	return t.take(c)
}

// LetGo reports that control was let go; it ends an EndOnLetGo hold.
func (t *Takeover) LetGo(ctrl string) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.controls[ctrl]
	if c == nil || t.closed || c.End != EndOnLetGo || !c.held {
		return c != nil, nil
	}
	return true, t.end(c, "let go")
}

// Close stops the timers of EndAfter holds and waits for one that fired.
// Holds stay as they are; later presses are ignored.
func (t *Takeover) Close() {
	t.mu.Lock()
	t.closed = true
	for _, c := range t.controls {
		if c.timer != nil && c.timer.Stop() {
			t.timers.Done()
		}
		c.timer = nil
	}
	t.mu.Unlock()
	t.timers.Wait()
}

// arm (re)starts c's timer: the hold ends c.After from now. mu is held.
func (t *Takeover) arm(c *control) {
	if c.timer != nil && c.timer.Stop() {
		t.timers.Done()
	}
	t.timers.Add(1)
	var timer *time.Timer
	timer = time.AfterFunc(c.After, func() {
		defer t.timers.Done()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.closed || c.timer != timer || !c.held {
			return // stopped too late, or re-armed by a later press
		}
		c.timer = nil
		if err := t.end(c, fmt.Sprintf("%v after the last press", c.After)); err != nil {
			t.report(err)
		}
	})
	c.timer = timer
}

// take moves c's resources to HUMAN (renewing a hold already there),
// cancels what agents run on them, and records it. mu is held.
func (t *Takeover) take(c *control) error {
	now := t.now()
	fresh := !c.held
	c.held = true
	var evs []ledger.Event
	for _, res := range c.Resources {
		l := t.leases.HumanTakeoverBy(res, c.Control, now)
		var cancelled []string
		if t.runner != nil {
			cancelled = t.runner.CancelTarget(res, ReasonHumanControl)
		}
		if !fresh && len(cancelled) == 0 {
			continue // a press that only renews: nothing new to record
		}
		evs = append(evs, t.event(EventHumanTakeover, c, humanTakeover{Resource: res, Control: c.Control, Epoch: l.Epoch, End: c.End,
			Cancelled: cancelled, Renewed: !fresh}))
	}
	return t.record(evs)
}

// end frees c's resources and records why. mu is held.
func (t *Takeover) end(c *control, why string) error {
	c.held = false
	if c.timer != nil && c.timer.Stop() {
		t.timers.Done()
	}
	c.timer = nil
	var evs []ledger.Event
	for _, res := range c.Resources {
		if t.leases.HumanRelease(res) {
			evs = append(evs, t.event(EventHumanReleased, c, humanReleased{Resource: res, Control: c.Control, Why: why}))
		}
	}
	return t.record(evs)
}

func (t *Takeover) event(typ string, c *control, payload any) ledger.Event {
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		t.report(fmt.Errorf("act: %s: %w", typ, err))
	}
	channel, _, _ := strings.Cut(c.Control, " ") // a key's device
	return ledger.Event{Type: typ, ChannelID: channel, Provenance: ledger.Observed, Trust: ledger.High,
		Privacy: ledger.Internal, Payload: p}
}

func (t *Takeover) record(evs []ledger.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if _, err := t.journal.Append(context.Background(), evs...); err != nil {
		return fmt.Errorf("act: %s not recorded: %w", evs[0].Type, err)
	}
	return nil
}
