package awareness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/ledger"
)

// The evidence operations: what the body kept to be looked at (a
// camera.snapshot's image, an audio.clip's sound), listed, looked at and
// deleted. Looking is its own grant, evidence.view, per source: a local
// administrator at high trust needs none; an agent or the home server
// needs one of its subject that covers the source (grant add --subject
// agent:pi --capability evidence.view --scope camera.front). Every look
// is recorded (evidence.viewed) before a byte is handed out. A piece
// frozen by a grant's revocation is shown to local administrators only.
var (
	OpEvidenceList = Op[EvidenceListIn, EvidenceList]{Name: "evidence.list", Kind: Observe, Least: EvidenceReaders,
		Tool:        Tool{Name: "list_evidence", ReadOnly: true, Idempotent: true},
		Description: "The evidence the body keeps now (snapshots and clips, each with who kept it, why, its hash and when it ends) that the caller may look at: from the sources an evidence.view grant of its subject covers."}
	OpEvidenceGet = Op[EvidenceGetIn, EvidenceGet]{Name: "evidence.get", Kind: Observe, Least: EvidenceReaders,
		Tool:        Tool{Name: "get_evidence", ReadOnly: true},
		Description: "One piece of evidence: its record, then its bytes (an agent gets a snapshot as image content, a clip as audio content). Needs an evidence.view grant covering its source; the look is recorded (evidence.viewed) before anything is shown."}
	OpEvidenceDelete = Op[EvidenceDeleteIn, evidence.Item]{Name: "evidence.delete", Kind: Interact, Least: EvidenceReaders,
		Tool:        Tool{Name: "delete_evidence", Destructive: true, Idempotent: true},
		Description: "Delete a piece of evidence now (evidence.deleted): a local administrator any piece, anyone else what it kept itself."}
)

// EvidenceReaders is who may ask for evidence at all: a local
// administrator or an agent at high trust, the trust a look needs
// (act.MinTrust(EvidenceViewRisk)); each piece is then checked against
// the caller's grants.
var EvidenceReaders = Least{Kinds: []act.PrincipalKind{act.LocalAdmin, act.AgentSession}, Trust: ledger.High}

// EvidenceView is the capability a look at evidence needs a grant of,
// scoped by the evidence's source; it weighs as EvidenceViewRisk.
const (
	EvidenceView     = "evidence.view"
	EvidenceViewRisk = act.R2
)

// MaxMedia bounds the bytes of a piece of evidence a transport sends
// whole in one message (an agent's image or audio content).
const MaxMedia = evidence.MaxItemBytes

// EvidenceListIn selects evidence; empty fields select all.
type EvidenceListIn struct {
	Source string        `json:"source,omitempty"`
	Kind   evidence.Kind `json:"kind,omitempty" jsonschema:"snapshot or clip"`
}

// EvidenceList is the evidence the caller may look at, oldest first.
type EvidenceList struct {
	Evidence []EvidenceEntry `json:"evidence"`
}

// EvidenceEntry is a piece of evidence as a caller sees it: its record,
// and how long it has left on the body's running clock.
type EvidenceEntry struct {
	evidence.Item
	// EndsInS is how many seconds of the body's running time it has
	// left: a body that is off does not count down.
	EndsInS int64 `json:"ends_in_s"`
}

// EvidenceGetIn names a piece.
type EvidenceGetIn struct {
	ID string `json:"id"`
}

// EvidenceDeleteIn names a piece and says why, for the record.
type EvidenceDeleteIn struct {
	ID  string `json:"id"`
	Why string `json:"why,omitempty"`
}

// EvidenceGet is a piece of evidence: the result is its record, and its
// bytes come after it (EvidenceGet is Streaming, and Media: an agent is
// sent them as image or audio content). One a client decoded has no
// bytes of its own.
type EvidenceGet struct {
	EvidenceEntry
	file *os.File
}

// Content is the piece's bytes.
func (g EvidenceGet) Content() (io.Reader, int64) {
	if g.file == nil {
		return strings.NewReader(""), 0
	}
	return g.file, g.Bytes
}

// MediaType is the piece's (image/jpeg, audio/wav).
func (g EvidenceGet) MediaType() string { return g.Item.MediaType }

// Close releases the piece's file.
func (g EvidenceGet) Close() error {
	if g.file == nil {
		return nil
	}
	return g.file.Close()
}

var errNoEvidence = refuse(ReasonUnavailable, "evidence is not available: the ledger or the evidence store is not open (see the body's log)")

// viewable says whether p may look at it: frozen pieces are a local
// administrator's alone; any other needs evidence.view on its source.
func (b *Parts) viewable(p act.Principal, it evidence.Item) act.Decision {
	if it.Frozen && p.Kind != act.LocalAdmin {
		return act.Decision{Reason: act.ReasonGrantRevoked, Detail: fmt.Sprintf("evidence %s was frozen when the grant it was captured under was revoked: a local administrator's alone", it.ID)}
	}
	return b.Grants.Allows(p, EvidenceView, EvidenceViewRisk, it.Source)
}

func (b *Parts) evidenceView(it evidence.Item) EvidenceEntry {
	left := it.Ends() - b.Store.Running()
	return EvidenceEntry{Item: it, EndsInS: int64(max(left, 0) / time.Second)}
}

func (b *Parts) evidenceList(_ context.Context, p act.Principal, in EvidenceListIn) (EvidenceList, error) {
	if b.Evidence == nil {
		return EvidenceList{}, errNoEvidence
	}
	if k := in.Kind; k != "" && k != evidence.Snapshot && k != evidence.Clip {
		return EvidenceList{}, refuse(ReasonInvalidParams, "kind %q: want snapshot or clip", k)
	}
	items, err := b.Evidence.List(evidence.Filter{Source: in.Source, Kind: in.Kind})
	if err != nil {
		return EvidenceList{}, err
	}
	out := EvidenceList{Evidence: []EvidenceEntry{}}
	for _, it := range items {
		if b.viewable(p, it).Allow {
			out.Evidence = append(out.Evidence, b.evidenceView(it))
		}
	}
	return out, nil
}

// lookup finds piece id, refused as not found when there is none.
func (b *Parts) lookup(id string) (evidence.Item, error) {
	if _, err := ledger.ParseUUID(id); err != nil {
		return evidence.Item{}, refuse(ReasonInvalidParams, "id %q is not an evidence id (a UUID)", id)
	}
	it, ok, err := b.Evidence.Lookup(id)
	if err != nil {
		return evidence.Item{}, err
	}
	if !ok {
		return evidence.Item{}, refuse(ReasonNotFound, "no evidence %s: it was never kept, or it ended", id)
	}
	return it, nil
}

// via is how the bytes leave, for the record of a look.
func via(p act.Principal) string { return string(p.Kind) }

func (b *Parts) evidenceGet(ctx context.Context, p act.Principal, in EvidenceGetIn) (EvidenceGet, error) {
	if b.Evidence == nil {
		return EvidenceGet{}, errNoEvidence
	}
	it, err := b.lookup(in.ID)
	if err != nil {
		return EvidenceGet{}, err
	}
	if d := b.viewable(p, it); !d.Allow {
		return EvidenceGet{}, refuse(d.Reason, "%s", d.Detail)
	}
	it, f, err := b.Evidence.View(ctx, it.ID, p.Subject, via(p))
	if errors.Is(err, evidence.ErrUnknown) {
		return EvidenceGet{}, refuse(ReasonNotFound, "no evidence %s: it ended", in.ID)
	}
	if err != nil {
		return EvidenceGet{}, err
	}
	return EvidenceGet{EvidenceEntry: b.evidenceView(it), file: f}, nil
}

func (b *Parts) evidenceDelete(ctx context.Context, p act.Principal, in EvidenceDeleteIn) (evidence.Item, error) {
	if b.Evidence == nil {
		return evidence.Item{}, errNoEvidence
	}
	it, err := b.lookup(in.ID)
	if err != nil {
		return evidence.Item{}, err
	}
	if p.Kind != act.LocalAdmin && it.By != p.Subject {
		return evidence.Item{}, refuse(ReasonNotAuthorized, "evidence %s was kept by %s: only it or a local administrator deletes it", it.ID, it.By)
	}
	why := cleanText(in.Why, 1024)
	it, err = b.Evidence.Delete(ctx, it.ID, p.Subject, why)
	if errors.Is(err, evidence.ErrUnknown) {
		return evidence.Item{}, refuse(ReasonNotFound, "no evidence %s: it ended", in.ID)
	}
	return it, err
}

// cleanText is s without control characters, at most n bytes of it.
func cleanText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return strings.TrimSpace(s)
}
