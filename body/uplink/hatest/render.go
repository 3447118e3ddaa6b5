package hatest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"
)

// Job is a template to render over a message: Value is its payload
// ("" for a command template, which is given Value as value alone).
type Job struct {
	Template string `json:"t"`
	Value    string `json:"v"`
}

const renderScript = `import datetime, json, sys, jinja2
env = jinja2.Environment()
out = []
for job in json.load(sys.stdin):
    try:
        value_json = json.loads(job["v"])
    except ValueError:
        value_json = None
    try:
        out.append({"ok": env.from_string(job["t"]).render(value=job["v"], value_json=value_json, now=datetime.datetime.now)})
    except Exception as e:
        out.append({"err": "%s: %s" % (type(e).__name__, e)})
json.dump(out, sys.stdout)`

// HaveJinja skips t when python3 has no Jinja2 (scripts/deps.sh installs
// python3-jinja2).
func HaveJinja(t testing.TB) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("no python3 with jinja2 here (%v): scripts/deps.sh installs python3-jinja2", err)
	}
}

// Render renders each job as Home Assistant renders a template: value is
// the message's text, value_json its JSON (None when it is not JSON),
// now() the time. A job Jinja2 cannot render fails t, naming it.
func Render(t testing.TB, jobs []Job) []string {
	t.Helper()
	in, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", renderScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("jinja2: %v\n%s", err, stderr.Bytes())
	}
	var res []struct{ OK, Err *string }
	if err := json.Unmarshal(b, &res); err != nil || len(res) != len(jobs) {
		t.Fatalf("jinja2 answered %s (%v)", b, err)
	}
	out := make([]string, len(jobs))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("jinja2 on %q over %q: %s", jobs[i].Template, jobs[i].Value, *r.Err)
		}
		out[i] = *r.OK
	}
	return out
}
