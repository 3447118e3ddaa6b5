package gate

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// Outcome is what L1 decides for an event.
type Outcome string

// The outcomes.
const (
	Ignore Outcome = "ignore" // nothing wanted it: the noise pool
	Record Outcome = "record" // wanted, but not worth an interruption now: recorded with the reason
	Wake   Outcome = "wake"   // pushed to the agent at an attention level
	Ask    Outcome = "ask"    // a person is asked (the work item waits for one)
)

// Band is the cost of waiting: a band from rules, not a number.
type Band string

// The bands, cheapest first.
const (
	BandLow      Band = "low"
	BandMedium   Band = "medium"
	BandHigh     Band = "high"
	BandCritical Band = "critical"
)

var bandRank = map[Band]int{BandLow: 0, BandMedium: 1, BandHigh: 2, BandCritical: 3}

// attentionOf is the attention a wake of a band asks for.
var attentionOf = map[Band]string{BandLow: "low", BandMedium: "medium", BandHigh: "high", BandCritical: "max"}

// bandOf is the band a condition's priority hint gives.
var bandOf = map[wait.Priority]Band{wait.Low: BandLow, wait.Medium: BandMedium, wait.High: BandHigh, wait.Max: BandCritical}

// Step is one rule L1 applied, and what it said.
type Step struct {
	Rule string `cbor:"rule" json:"rule"`
	Said string `cbor:"said" json:"said"`
}

// Decision is L1's decision on one event, with the path that led to it:
// every decision not to wake says why (Reason).
type Decision struct {
	Event     string  `cbor:"event_id" json:"event_id"`
	Seq       uint64  `cbor:"seq" json:"seq"`
	Type      string  `cbor:"event_type" json:"event_type"`
	Outcome   Outcome `cbor:"outcome" json:"outcome"`
	Attention string  `cbor:"attention,omitempty" json:"attention,omitempty"`
	Band      Band    `cbor:"band,omitempty" json:"band,omitempty"`
	Condition string  `cbor:"condition,omitempty" json:"condition,omitempty"`
	WorkItem  string  `cbor:"work_item,omitempty" json:"work_item,omitempty"`
	// Rule is the default rule that decided, for an event no wait
	// condition wanted.
	Rule string `cbor:"rule,omitempty" json:"rule,omitempty"`
	// FollowUp is the work item the condition's wake made (its
	// FollowUp), when one was made.
	FollowUp string `cbor:"follow_up,omitempty" json:"follow_up,omitempty"`
	// Evidence is what the condition's wake captured (its Evidence), in
	// the same record as the decision, so the event and what was kept of
	// it are never told apart; EvidenceError why nothing was kept.
	Evidence      *Evidence `cbor:"evidence,omitempty" json:"evidence,omitempty"`
	EvidenceError string    `cbor:"evidence_error,omitempty" json:"evidence_error,omitempty"`
	Reason        string    `cbor:"reason,omitempty" json:"reason,omitempty"`
	Path          []Step    `cbor:"path" json:"path"`
	// Words, for a wake or a question, is the 1-based position in
	// Rules.Defaults of the default rule whose words tell of the event:
	// the first that selects its type, channel and payload, whatever its
	// attention and whichever rule decided (a hard rule, a condition, a
	// default). 0: none does. The gate sets it before it pushes (a
	// default rule's wake has it from Decide): the rules are matched in
	// the gate, once, and whoever says the decision in words looks the
	// rule up by it. It is not recorded, since a position means something
	// only to the rules of the run that decided.
	Words int `cbor:"-" json:"-"`
}

// Evidence names a piece of evidence the body kept: its id, the SHA-256
// of its bytes, its media type and the ledger sequence of its record.
type Evidence struct {
	ID        string `cbor:"id" json:"id"`
	SHA256    string `cbor:"sha256" json:"sha256"`
	MediaType string `cbor:"media_type" json:"media_type"`
	Seq       uint64 `cbor:"seq" json:"seq"`
}

// step appends a rule and what it said to the decision's path.
func (d *Decision) step(rule, format string, a ...any) {
	d.Path = append(d.Path, Step{rule, fmt.Sprintf(format, a...)})
}

// settle decides: the outcome, the reason of any but a wake, and the
// path's last step.
func (d *Decision) settle(o Outcome, reason string) Decision {
	d.Outcome = o
	if o != Wake {
		d.Reason = reason
	}
	d.step("decision", "%s: %s", o, reason)
	return *d
}

// HardTypes are the event types (or prefixes) that always wake, whatever
// any other rule says: the e-stop, safety (a person's takeover, the body
// degraded) and permissions (grants, approvals).
var HardTypes = []struct {
	Prefix    string
	Attention string
	What      string
}{
	{"estop.", "max", "e-stop"},
	{"lease.human_", "high", "safety: a person's takeover"},
	{"body.degradation", "high", "safety: the body's degradation"},
	{"grant.", "high", "permission"},
	{"approval.", "high", "permission"},
}

// Rules are L1's settings.
type Rules struct {
	// Bands give the cost of waiting by event type (a type, or a prefix
	// ending in a dot), above a condition's priority hint: the higher of
	// the two counts.
	Bands map[string]Band
	// NoveltyHalfLife: repeats of one source (channel and type) decay
	// with it; a source repeated Repeats times within about a half-life
	// is not novel, and its matches are recorded, not woken (critical
	// ones excepted). Zero: novelty is not weighed.
	NoveltyHalfLife time.Duration
	Repeats         float64
	// MinTrust: a matched event below this trust is recorded, not woken
	// (its source is not trusted enough to interrupt for).
	MinTrust ledger.Level
	// ItemBudget is a work item's interruptions unless it has its own
	// budget; Global the body's, all items together. A critical band
	// may exceed them.
	ItemBudget, Global Budget
	// Quiet are the quiet periods: nothing but a hard rule wakes then.
	Quiet []Quiet
	// Merge: a work item's match within this of its last interruption,
	// still unanswered, is merged into it (recorded, not pushed again).
	Merge time.Duration
	// AnswerWithin: an interruption nobody answered (no change of its
	// work item by the agent or a person) within this is recorded as
	// unanswered.
	AnswerWithin time.Duration
	// Defaults are the default rules, for the events no wait condition
	// wanted (the first that matches decides).
	Defaults []Default
}

// Default is a default rule: the attention an event that no wait
// condition wanted wakes the agent at, with no work item. The config's
// observation rules are the defaults. It matches events of Type (a type,
// or a prefix ending in a dot), on Channel (a channel id, a prefix ending
// in ".*", "*" or "" for any), whose payload has each field of When equal
// to its value (compared as text). Attention "off" wakes nothing: the
// event is left to the noise pool. A default's wake weighs confidence,
// novelty, the quiet periods and the body's budget like a condition's;
// an event a condition wanted is that condition's to decide, even when it
// decides not to wake.
type Default struct {
	Name      string
	Type      string
	Channel   string
	When      map[string]string
	Attention string
}

// Check says what is wrong with the rules, or returns nil.
func (r *Rules) Check() error {
	for sel, b := range r.Bands {
		if _, ok := bandRank[b]; !ok {
			return fmt.Errorf("band of %s: %q is not low, medium, high or critical", sel, b)
		}
	}
	for _, q := range r.Quiet {
		if err := q.Check(); err != nil {
			return err
		}
	}
	for i, d := range r.Defaults {
		if _, err := ledger.ParseLevel(d.Attention); err != nil {
			return fmt.Errorf("default rule %d (%s): attention: %w", i, d.Type, err)
		}
		if d.Type == "" {
			return fmt.Errorf("default rule %d: no type", i)
		}
	}
	for _, b := range []Budget{r.ItemBudget, r.Global} {
		if b.Window < 0 || b.Max < 0 {
			return fmt.Errorf("budget %d in %v: negative", b.Max, b.Window)
		}
	}
	return nil
}

// compiledDefault is a default rule as Decide uses it.
type compiledDefault struct {
	Default
	attention ledger.Level
	band      Band
	pos       int // 1-based, in Rules.Defaults
}

// bandOfLevel is the band a default's attention stands for.
var bandOfLevel = map[ledger.Level]Band{ledger.Low: BandLow, ledger.Medium: BandMedium, ledger.High: BandHigh, ledger.Max: BandCritical}

func compileDefaults(ds []Default) []compiledDefault {
	out := make([]compiledDefault, len(ds))
	for i, d := range ds {
		if d.Name == "" {
			d.Name = fmt.Sprintf("default rule %d (%s)", i, d.Type)
		}
		lv, err := ledger.ParseLevel(d.Attention)
		if err != nil { // Check refuses it; unchecked, it wakes nothing
			lv = ledger.Off
		}
		out[i] = compiledDefault{Default: d, attention: lv, band: bandOfLevel[lv], pos: i + 1}
	}
	return out
}

// standing returns the first default rule that matches e, or nil.
func (s *Salience) standing(e *ledger.Stored) *compiledDefault { return s.standingWith(e, &s.fields) }

// standingWith is standing reading payloads with f: a caller beside the
// gate's own (Woken) brings its own.
func (s *Salience) standingWith(e *ledger.Stored, f *wait.Fields) *compiledDefault {
	reset := false
	for i := range s.defaults {
		r := &s.defaults[i]
		if !SelectsType(r.Type, e.Type) || !SelectsChannel(r.Channel, e.ChannelID) {
			continue
		}
		if len(r.When) > 0 && !reset {
			f.Reset(e.Payload)
			reset = true
		}
		if whenHolds(r.When, f) {
			return r
		}
	}
	return nil
}

// Words is the 1-based position of the default rule whose words tell of
// e (the first that selects its type, channel and payload, whatever its
// attention), or 0 when none does: Decision.Words for a decision that
// did not find it deciding.
func (s *Salience) Words(e *ledger.Stored) int {
	if r := s.standing(e); r != nil {
		return r.pos
	}
	return 0
}

// SelectsType tells whether a type selector (a type, or a prefix ending
// in a dot) selects an event type.
func SelectsType(sel, typ string) bool { return ledger.MatchType(sel, typ) }

// SelectsChannel tells whether a channel selector selects a channel: ""
// or "*" select any, a prefix ending in ".*" every channel under it (not
// the prefix itself), an id itself. The config's patterns are checked
// where they are read.
func SelectsChannel(sel, ch string) bool {
	switch {
	case sel == "" || sel == "*":
		return true
	case strings.HasSuffix(sel, ".*"):
		return len(ch) > len(sel)-1 && strings.HasPrefix(ch, sel[:len(sel)-1])
	}
	return sel == ch
}

func whenHolds(when map[string]string, f *wait.Fields) bool {
	for k, want := range when {
		v, ok := f.Get(k)
		if !ok || fmt.Sprint(v) != want {
			return false
		}
	}
	return true
}

// DefaultRules are the rules a body starts with.
func DefaultRules() Rules {
	return Rules{
		Bands:           map[string]Band{"body.hot": BandMedium, "body.throttled": BandMedium, "body.disk_low": BandHigh},
		NoveltyHalfLife: 10 * time.Minute,
		Repeats:         5,
		MinTrust:        ledger.Low,
		ItemBudget:      Budget{Max: 6, Window: time.Hour},
		Global:          Budget{Max: 30, Window: time.Hour},
		Merge:           2 * time.Minute,
		AnswerWithin:    30 * time.Minute,
	}
}

// Salience is L1: the rules and what they remember of recent events
// (the novelty of each source). It is not safe for concurrent use: the
// gate owns it. What it remembers is lost at a restart: the sources
// then seem novel, which can only wake, never silence.
type Salience struct {
	Rules Rules
	// State is what the budgets and merging count (nil: none).
	State *Interrupts
	// novelty: per source, a count of its events decayed by the half-life.
	novelty map[source]*decayed
	// seen: for a condition that dedupes by a field, when each value
	// last woke (Unix ms).
	seen map[seenKey]int64
	// defaults are Rules.Defaults compiled; fields reads their payloads.
	defaults []compiledDefault
	fields   wait.Fields
}

type seenKey struct {
	cond  string
	value any
}

// source is where events come from: a channel and an event type.
type source struct{ channel, typ string }

func (s source) String() string { return s.channel + " " + s.typ }

type decayed struct {
	n  float64
	at time.Time
}

// NewSalience makes L1 with rules.
func NewSalience(r Rules) *Salience {
	return &Salience{Rules: r, novelty: map[source]*decayed{}, seen: map[seenKey]int64{}, defaults: compileDefaults(r.Defaults)}
}

// reasonNoCondition is the reason of an event nothing wanted.
const reasonNoCondition = "no wait condition wants it: kept in the noise pool's sample"

// Items finds a work item as it stands.
type Items func(id string) (work.Item, bool)

// Decide decides on one event that L0 saw: matches are the conditions it
// matched, at now (the wall clock, for cooldowns measured against the
// conditions' last matches; the monotonic reading, for novelty). Every
// outcome but Wake carries its Reason; Path lists every rule applied.
// A default rule's wake says its rule's words (Words); any other's are
// found by Words, when the decision is to be said.
func (s *Salience) Decide(e *ledger.Stored, matches []*wait.Condition, items Items, now time.Time) Decision {
	d := Decision{Event: e.ID.String(), Seq: e.Seq, Type: e.Type}
	step, settle := d.step, d.settle

	// The hard rules first: nothing below can silence them.
	for _, h := range HardTypes {
		if strings.HasPrefix(e.Type, h.Prefix) {
			d.Attention, d.Band = h.Attention, BandCritical
			if len(matches) > 0 { // a condition wanted it too: named, for whoever waits
				d.Condition, d.WorkItem = matches[0].ID, matches[0].Owner
			}
			step("hard rule", "%s always wakes (%s), whatever else applies", h.What, h.Attention)
			return settle(Wake, "hard rule: "+h.What)
		}
	}
	novel := s.noteNovelty(e, now)
	if len(matches) == 0 {
		if IsSystem(e.Type) {
			d.Attention, d.Band = "high", BandHigh
			step("system rule", "%s matches a fixed rule", e.Type)
			return settle(Wake, "system event")
		}
		if r := s.standing(e); r != nil && r.attention > ledger.Off {
			return s.decideDefault(e, r, now, novel, d)
		}
		// The most common decision by far: no formatting.
		d.Outcome, d.Reason = Ignore, reasonNoCondition
		d.Path = []Step{{"L0", "no wait condition wants its type and channel, or its payload"}, {"decision", "ignore: " + reasonNoCondition}}
		return d
	}

	// The candidates, the weightiest first; the first that wakes decides,
	// and if none does, the first one's reason is the event's.
	var first *Decision
	for _, c := range byWeight(matches, s.Rules.Bands, e.Type) {
		cd := s.decideOne(e, c, items, now, novel)
		d.Path = append(d.Path, cd.Path...)
		if cd.Outcome == Wake || cd.Outcome == Ask {
			d.Outcome, d.Attention, d.Band, d.Condition, d.WorkItem = cd.Outcome, cd.Attention, cd.Band, cd.Condition, cd.WorkItem
			return settle(cd.Outcome, cd.Reason)
		}
		if first == nil {
			first = &cd
		}
	}
	d.Band, d.Condition, d.WorkItem = first.Band, first.Condition, first.WorkItem
	return settle(Record, first.Reason)
}

// decideDefault weighs the default rule r for an event no condition
// wanted: its band (the higher of its attention's and the rules' for the
// type), confidence, novelty, the quiet periods and the body's budget.
func (s *Salience) decideDefault(e *ledger.Stored, r *compiledDefault, now time.Time, novel noveltyNote, d Decision) Decision {
	step, settle := d.step, d.settle
	d.Rule, d.Band, d.Attention, d.Words = r.Name, r.band, r.attention.String(), r.pos
	if b := ruleBand(s.Rules.Bands, e.Type); b != "" && bandRank[b] > bandRank[d.Band] {
		d.Band, d.Attention = b, attentionOf[b]
	}
	step("L0", "no wait condition wants it")
	step("default rule", "%s: attention %s, band %s", r.Name, r.attention, d.Band)
	if e.Trust < s.Rules.MinTrust && d.Band != BandCritical {
		step("confidence", "trust %s, below %s", e.Trust, s.Rules.MinTrust)
		d.Attention = ""
		return settle(Record, fmt.Sprintf("low confidence: the event's trust %s is below %s", e.Trust, s.Rules.MinTrust))
	}
	if novel.repeats >= s.Rules.Repeats && s.Rules.Repeats > 0 && d.Band != BandCritical {
		step("novelty", "%s repeated %.1f times within a half-life of %v", novel.source, novel.repeats, s.Rules.NoveltyHalfLife)
		d.Attention = ""
		return settle(Record, fmt.Sprintf("not novel: %s repeated %.1f times within a half-life (%v), at band %s", novel.source,
			novel.repeats, s.Rules.NoveltyHalfLife, d.Band))
	}
	step("novelty", "%s: %.1f recent repeats", novel.source, novel.repeats)
	if why := s.budgetStep("", nil, d.Band, now, step); why != "" {
		d.Attention = ""
		return settle(Record, why)
	}
	return settle(Wake, "default rule "+r.Name)
}

// decideOne weighs one matched condition.
func (s *Salience) decideOne(e *ledger.Stored, c *wait.Condition, items Items, now time.Time, novel noveltyNote) Decision {
	d := Decision{Condition: c.ID, WorkItem: c.Owner}
	step := d.step
	out := func(o Outcome, reason string) Decision {
		d.Outcome, d.Reason = o, reason
		return d
	}
	d.Band = bandFor(c, s.Rules.Bands, e.Type)
	step("relevance", "condition %s of work item %s (priority %s) matched; band %s", c.ID, c.Owner, c.Priority, d.Band)

	it, ok := items(c.Owner)
	switch {
	case !ok:
		step("relevance", "work item %s is not there", c.Owner)
		return out(Record, fmt.Sprintf("work item %s is not there", c.Owner))
	case it.Status.Final():
		step("relevance", "work item %s is %s", c.Owner, it.Status)
		return out(Record, fmt.Sprintf("work item %s is %s", c.Owner, it.Status))
	}
	if c.CooldownMS > 0 && c.LastMatchedAt > 0 && c.Dedupe != wait.DedupeField { // by field: a cooldown per value, below
		since := now.UnixMilli() - c.LastMatchedAt
		if since < 0 {
			step("cooldown", "the last match (%s) is %v after now: the wall clock stepped back; no cooldown is held", c.LastEvent, time.Duration(-since)*time.Millisecond)
		} else if since < c.CooldownMS {
			step("cooldown", "matched %s %v ago; cooldown %v", c.LastEvent, time.Duration(since)*time.Millisecond, time.Duration(c.CooldownMS)*time.Millisecond)
			return out(Record, fmt.Sprintf("cooldown: condition %s matched %v ago (event %s), within its %v", c.ID,
				time.Duration(since)*time.Millisecond, c.LastEvent, time.Duration(c.CooldownMS)*time.Millisecond))
		}
		if since >= 0 {
			step("cooldown", "last match %v ago, past the cooldown", time.Duration(since)*time.Millisecond)
		}
	}
	var dedupe *seenKey
	if c.Dedupe == wait.DedupeField {
		v, ok := wait.DecodeFields(e.Payload).Get(c.DedupeField)
		if k, kok := wait.Key(v); ok && kok {
			dedupe = &seenKey{c.ID, k}
			if last, ok := s.seen[*dedupe]; ok && within(now.UnixMilli()-last, max(c.CooldownMS, 1)) {
				step("dedupe", "%s %v woke %v ago, within the cooldown", c.DedupeField, k, time.Duration(now.UnixMilli()-last)*time.Millisecond)
				return out(Record, fmt.Sprintf("dedupe: condition %s already woke for %s %v %v ago, within its %v", c.ID, c.DedupeField, k,
					time.Duration(now.UnixMilli()-last)*time.Millisecond, time.Duration(c.CooldownMS)*time.Millisecond))
			}
		}
	}
	if e.Trust < s.Rules.MinTrust && d.Band != BandCritical {
		step("confidence", "trust %s, below %s", e.Trust, s.Rules.MinTrust)
		return out(Record, fmt.Sprintf("low confidence: the event's trust %s is below %s", e.Trust, s.Rules.MinTrust))
	}
	step("confidence", "trust %s, provenance %s", e.Trust, e.Provenance)
	if novel.repeats >= s.Rules.Repeats && s.Rules.Repeats > 0 && d.Band != BandCritical {
		step("novelty", "%s repeated %.1f times within a half-life of %v", novel.source, novel.repeats, s.Rules.NoveltyHalfLife)
		return out(Record, fmt.Sprintf("not novel: %s repeated %.1f times within a half-life (%v), at band %s", novel.source,
			novel.repeats, s.Rules.NoveltyHalfLife, d.Band))
	}
	step("novelty", "%s: %.1f recent repeats", novel.source, novel.repeats)
	if why := s.budgetStep(c.Owner, it.Budget, d.Band, now, step); why != "" {
		return out(Record, why)
	}
	d.Attention = attentionOf[d.Band]
	if dedupe != nil {
		if len(s.seen) >= maxSources {
			clear(s.seen)
		}
		s.seen[*dedupe] = now.UnixMilli()
	}
	if it.Status == work.AwaitingUser {
		step("who", "work item %s awaits a person", c.Owner)
		return out(Ask, fmt.Sprintf("work item %s awaits a person", c.Owner))
	}
	step("who", "the agent, at attention %s", d.Attention)
	return out(Wake, "")
}

// noveltyNote is what the novelty of an event's source was before it.
type noveltyNote struct {
	source  source
	repeats float64
}

// noteNovelty counts the event against its source and returns how many
// recent repeats came before it (decayed by the half-life).
func (s *Salience) noteNovelty(e *ledger.Stored, now time.Time) noveltyNote {
	src := source{e.ChannelID, e.Type}
	hl := s.Rules.NoveltyHalfLife
	if hl <= 0 {
		return noveltyNote{source: src}
	}
	st := s.novelty[src]
	if st == nil {
		if len(s.novelty) >= maxSources {
			s.forgetOld(now)
		}
		st = &decayed{at: now}
		s.novelty[src] = st
	}
	if dt := now.Sub(st.at); dt > 0 {
		st.n *= math.Exp2(-float64(dt) / float64(hl))
	}
	before := st.n
	st.n++
	st.at = now
	return noveltyNote{source: src, repeats: before}
}

// maxSources bounds the sources L1 remembers.
const maxSources = 4096

// forgetOld drops the sources whose count decayed below one event.
func (s *Salience) forgetOld(now time.Time) {
	for k, st := range s.novelty {
		if st.n*math.Exp2(-float64(now.Sub(st.at))/float64(s.Rules.NoveltyHalfLife)) < 1 {
			delete(s.novelty, k)
		}
	}
	if len(s.novelty) >= maxSources { // all still counted: start afresh rather than grow
		clear(s.novelty)
	}
}

// bandFor is a condition's band for an event type: the higher of its
// priority's and the rules' for the type.
func bandFor(c *wait.Condition, bands map[string]Band, typ string) Band {
	b := bandOf[c.Priority]
	if b == "" {
		b = BandMedium
	}
	if rule := ruleBand(bands, typ); rule != "" && bandRank[rule] > bandRank[b] {
		b = rule
	}
	return b
}

// ruleBand is the band the most specific of the rules' bands gives a
// type, or "".
func ruleBand(bands map[string]Band, typ string) Band {
	var rule Band
	best := -1
	for sel, rb := range bands {
		if SelectsType(sel, typ) && len(sel) > best {
			best, rule = len(sel), rb
		}
	}
	return rule
}

// byWeight orders matched conditions by band, highest first, then by id.
func byWeight(cs []*wait.Condition, bands map[string]Band, typ string) []*wait.Condition {
	out := append([]*wait.Condition(nil), cs...)
	rank := func(c *wait.Condition) int { return bandRank[bandFor(c, bands, typ)] }
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (rank(out[j]) > rank(out[j-1]) || rank(out[j]) == rank(out[j-1]) && out[j].ID < out[j-1].ID); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
