package rules

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

func TestPipelineName(t *testing.T) {
	long := strings.Repeat("n", 250)
	tests := []struct {
		name, trigger, object string
		uid                   types.UID
		want                  string
	}{
		{name: "plain", trigger: "retire", object: "node-1", uid: "uid-1", want: "retire-node-1-" + hash5("uid-1")},
		{name: "dotted node name", trigger: "retire", object: "ip-10-0-0-1.ec2.internal", uid: "u",
			want: "retire-ip-10-0-0-1.ec2.internal-" + hash5("u")},
		{name: "characters a subdomain has not", trigger: "t", object: "system:Node_A", uid: "u",
			want: "t-system-node-a-" + hash5("u")},
		{name: "labels that would start or end with a dash", trigger: "t", object: "a.-b-.c", uid: "u",
			want: "t-a.b.c-" + hash5("u")},
		{name: "empty labels", trigger: "t", object: "a..b.", uid: "u", want: "t-a.b-" + hash5("u")},
		{name: "cut to fit", trigger: "retire", object: long, uid: "u",
			want: "retire-" + strings.Repeat("n", 253-len("retire-")-6) + "-" + hash5("u")},
		{name: "cut before a dot", trigger: "t", object: strings.Repeat("a", 244) + ".b", uid: "u",
			want: "t-" + strings.Repeat("a", 244) + "-" + hash5("u")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PipelineName(tt.trigger, tt.object, tt.uid)
			assert.Equal(t, tt.want, got)
			assert.Empty(t, validation.IsDNS1123Subdomain(got))
		})
	}
}

func TestPipelineNameDiffersByUID(t *testing.T) {
	long := strings.Repeat("x", 300)
	assert.NotEqual(t, PipelineName("t", "node", "uid-1"), PipelineName("t", "node", "uid-2"),
		"a re-created object gets a new pipeline")
	assert.NotEqual(t, PipelineName("t", long+"a", "uid-1"), PipelineName("t", long+"b", "uid-2"),
		"long names that share their start do not collide")
	assert.Len(t, hash5("anything"), 5)
}

func TestTriggerLabelValue(t *testing.T) {
	tests := []struct{ name, trigger, want string }{
		{name: "short", trigger: "retire", want: "retire"},
		{name: "exactly 63", trigger: strings.Repeat("a", 63), want: strings.Repeat("a", 63)},
		{name: "too long", trigger: strings.Repeat("a", 64), want: strings.Repeat("a", 57) + "-" + hash5(strings.Repeat("a", 64))},
		{name: "cut ends in a dot", trigger: strings.Repeat("a", 56) + "." + strings.Repeat("b", 10),
			want: strings.Repeat("a", 56) + "-" + hash5(strings.Repeat("a", 56)+"."+strings.Repeat("b", 10))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LabelValueOf(tt.trigger)
			assert.Equal(t, tt.want, got)
			assert.Empty(t, validation.IsValidLabelValue(got))
		})
	}
}

func TestObjectAnnotation(t *testing.T) {
	assert.Equal(t, "ns/web", ObjectKey("ns", "web"))
	assert.Equal(t, "node-1", ObjectKey("", "node-1"))
}

func TestTaintValueOf(t *testing.T) {
	trig := triggertest.Trigger()
	assert.Equal(t, "ns.retire", TaintValueOf(trig))
	trig.Name = strings.Repeat("r", 70)
	got := TaintValueOf(trig)
	assert.Equal(t, "ns."+strings.Repeat("r", 54)+"-"+hash5("ns."+trig.Name), got)
	assert.Empty(t, validation.IsValidLabelValue(got))
}

// TestHash pins the hash that ends names: a change would rename every pipeline a trigger
// made, and the trigger would make them again.
func TestHash(t *testing.T) {
	assert.Equal(t, "5cu6s", hash5("uid-node-1"))
}
