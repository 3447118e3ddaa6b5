package edge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/awareness"
)

// The line codec: JSON-RPC 2.0, one object a line, as both sockets speak
// it. A line ends at '\n' (a '\r' before it is not part of it); a last
// line without its newline, at the end of the stream, is a line too.

// JSON-RPC 2.0 error codes the codec answers itself.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
)

// MaxID is the largest magnitude of an integer id: ids are read through
// a float64 (the MCP SDK's are), which carries integers up to it exactly.
const MaxID = 1<<53 - 1

// ErrLineTooLong is what LineReader.Next returns for a line over its
// limit, once the line was skipped to its end.
var ErrLineTooLong = errors.New("edge: a line over the limit")

// LineReader reads lines of at most a limit of bytes from a stream. A
// longer line is skipped to its newline without being buffered: its
// memory is its bufio.Reader and one line of at most the limit. It is
// not safe for concurrent use.
type LineReader struct {
	br   *bufio.Reader
	max  int
	buf  []byte
	n    int  // the length of the line being read, kept or not
	long bool // the line being read is over max

	// Peak is the largest the line's buffer ever was, for tests.
	Peak int
}

// NewLineReader reads lines of at most maxLine bytes, without their
// newline, from br.
func NewLineReader(br *bufio.Reader, maxLine int) *LineReader {
	return &LineReader{br: br, max: maxLine}
}

// Next returns the next line without its newline (and without a '\r'
// before it), valid until the next call. A line of more than the limit
// is ErrLineTooLong, and the next call reads the line after it. A last
// line without its newline is returned whole (ErrLineTooLong if long),
// and the call after it returns the stream's error (io.EOF). A read
// error (a deadline) mid-line keeps what was read of the line: the next
// call goes on with it.
func (r *LineReader) Next() ([]byte, error) {
	for {
		chunk, err := r.br.ReadSlice('\n')
		content := bytes.TrimSuffix(chunk, []byte{'\n'})
		r.n += len(content)
		if !r.long {
			if r.n > r.max {
				r.long, r.buf = true, r.buf[:0]
			} else {
				if len(r.buf)+len(content) > cap(r.buf) {
					// Grow by doubling, never past max.
					grown := make([]byte, len(r.buf), min(max(2*cap(r.buf), len(r.buf)+len(content)), r.max))
					copy(grown, r.buf)
					r.buf = grown
				}
				r.buf = append(r.buf, content...)
				r.Peak = max(r.Peak, cap(r.buf))
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil, errors.Is(err, io.EOF) && r.n > 0:
			return r.end()
		}
		return nil, err
	}
}

// end ends the line read so far.
func (r *LineReader) end() ([]byte, error) {
	line, long := bytes.TrimSuffix(r.buf, []byte{'\r'}), r.long
	r.buf, r.n, r.long = r.buf[:0], 0, false
	if long {
		return nil, ErrLineTooLong
	}
	return line, nil
}

// Blank tells whether line holds nothing but JSON's whitespace: such a
// line is no message, and is skipped.
func Blank(line []byte) bool { return len(bytes.TrimLeft(line, " \t\r\n")) == 0 }

// Message is one line read as JSON-RPC 2.0: a request (ID nil: a
// notification) or a response of the peer's.
type Message struct {
	ID     json.RawMessage // as sent; nil when absent
	Method string          // "" for a response
	Params json.RawMessage // as sent; nil when absent
	// Response is set for a response (no method; a result or an error):
	// its ID is set, its result or error left in the line.
	Response bool
}

// Bad is why a line is no message, and how to answer it.
type Bad struct {
	Code int    // CodeParse or CodeInvalidRequest
	Why  string // without the code's prefix
	ID   json.RawMessage
	// Drop is set for a malformed response: it is reported, never
	// answered (answering could start an endless exchange of errors with
	// a peer that does the same).
	Drop bool
}

// Error is b's JSON-RPC error: "Parse error: WHY" or "Invalid Request:
// WHY".
func (b *Bad) Error() *Error {
	prefix := "Invalid Request: "
	if b.Code == CodeParse {
		prefix = "Parse error: "
	}
	return &Error{Code: b.Code, Message: prefix + b.Why}
}

// Parse reads one line that is not Blank. It returns the message, or
// why the line is none:
//
//   - not valid UTF-8, a NUL byte, not JSON, or data after the JSON value:
//     CodeParse;
//   - a batch (a JSON array): CodeInvalidRequest, "batches are not
//     supported";
//   - JSON that is not a JSON-RPC 2.0 message (not an object, no
//     "jsonrpc":"2.0" spelt so, an id that is not a string or an integer
//     of magnitude at most MaxID — null is refused, as MCP requires — no
//     method or one that is not a string): CodeInvalidRequest, with the
//     id when it could be read.
//
// What params are is the transport's to check. Parse keeps nothing of
// line: what it returns is its own.
func Parse(line []byte) (Message, *Bad) {
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	switch {
	case bytes.IndexByte(line, 0) >= 0:
		return Message{}, &Bad{Code: CodeParse, Why: "the line contains a NUL byte"}
	case !utf8.Valid(line):
		return Message{}, &Bad{Code: CodeParse, Why: "the line is not valid UTF-8"}
	case !json.Valid(line):
		if len(trimmed) > 0 && json.NewDecoder(bytes.NewReader(line)).Decode(new(json.RawMessage)) == nil {
			return Message{}, &Bad{Code: CodeParse, Why: "data after the JSON value"}
		}
		return Message{}, &Bad{Code: CodeParse, Why: "not JSON"}
	case trimmed[0] == '[':
		// json.Valid checked the whole array without decoding its
		// elements; none is decoded here either.
		return Message{}, &Bad{Code: CodeInvalidRequest, Why: "batches are not supported"}
	case trimmed[0] != '{':
		return Message{}, &Bad{Code: CodeInvalidRequest, Why: "not a JSON-RPC message object"}
	}
	// The envelope is read as raw members so that a key's presence, and
	// its exact spelling, are seen (a struct would match keys regardless
	// of case).
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return Message{}, &Bad{Code: CodeInvalidRequest, Why: "not a JSON-RPC message object"}
	}
	id, idWhy := readID(env)
	_, hasMethod := env["method"]
	_, hasResult := env["result"]
	_, hasError := env["error"]

	if !hasMethod && (hasResult || hasError) {
		drop := func(why string) (Message, *Bad) {
			return Message{}, &Bad{Code: CodeInvalidRequest, Why: "response dropped: " + why, ID: id, Drop: true}
		}
		switch {
		case !versionOK(env):
			return drop(`no "jsonrpc":"2.0"`)
		case idWhy != "":
			return drop(idWhy)
		case id == nil:
			return drop("no id")
		case hasResult && hasError:
			return drop("both a result and an error")
		}
		return Message{ID: id, Response: true}, nil
	}

	invalid := func(why string) (Message, *Bad) {
		return Message{}, &Bad{Code: CodeInvalidRequest, Why: why, ID: id}
	}
	switch {
	case !versionOK(env):
		return invalid(`no "jsonrpc":"2.0"`)
	case idWhy != "":
		return invalid(idWhy)
	case !hasMethod:
		return invalid("no method")
	}
	var method string
	if err := json.Unmarshal(env["method"], &method); err != nil {
		return invalid("the method is not a string")
	}
	return Message{ID: id, Method: method, Params: env["params"]}, nil
}

// versionOK reports whether env has "jsonrpc":"2.0".
func versionOK(env map[string]json.RawMessage) bool {
	var v string
	return json.Unmarshal(env["jsonrpc"], &v) == nil && v == "2.0"
}

// readID is the envelope's id (nil when absent or unusable), and why it
// is unusable. An id is a string or an integer of magnitude at most
// MaxID; null is refused, as MCP requires.
func readID(env map[string]json.RawMessage) (id json.RawMessage, why string) {
	raw, present := env["id"]
	if !present {
		return nil, ""
	}
	switch c := raw[0]; {
	case c == '"':
		return raw, ""
	case c == '-' || c >= '0' && c <= '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > MaxID || n < -MaxID {
			return nil, "the id must be a string or an integer of at most 2^53-1"
		}
		return raw, ""
	case c == 'n':
		return nil, "the id must not be null"
	}
	return nil, "the id must be a string or an integer"
}

// Error is a JSON-RPC 2.0 error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Response is a JSON-RPC 2.0 response; ID nil is written null.
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// null is the id of an error that answers no request that could be read.
var null = json.RawMessage("null")

// Encode is r as one line, with its newline; jsonrpc is set, and an ID
// nil is null. A result that cannot be encoded is answered with an
// error response saying so (reason failed).
func (r Response) Encode() []byte {
	r.JSONRPC = "2.0"
	if r.ID == nil {
		r.ID = null
	}
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(Response{JSONRPC: "2.0", ID: r.ID, Error: &Error{Code: CodeRefused, Message: "the answer could not be encoded: " + err.Error(),
			Data: &awareness.Error{Reason: awareness.ReasonFailed, Detail: err.Error()}}})
	}
	return append(b, '\n')
}

// ErrorLine is the line of an error response to id (nil: null, for a
// line whose id could not be read), with its newline.
func ErrorLine(id json.RawMessage, e *Error) []byte { return Response{ID: id, Error: e}.Encode() }

// CodeRefused is the code of an answer that could not be encoded (the
// admin socket's code of every refusal).
const CodeRefused = -32000

// LongLine is why a line over maxLine bytes is refused.
func LongLine(maxLine int) *Bad {
	return &Bad{Code: CodeInvalidRequest, Why: fmt.Sprintf("a line of more than %d bytes", maxLine)}
}
