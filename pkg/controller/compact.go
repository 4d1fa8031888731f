package controller

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// compactPipeline makes a pipeline decoded for the cache take less memory and leaves its
// value as it was (equality.Semantic.DeepEqual): the cache holds every pipeline of the
// cluster, finished ones too, and most of its bytes are the same strings again (executor,
// phase, hook, condition and reason names, messages, hashes of identical steps) and the
// spare capacity decoding leaves in slices. Repeated strings are interned (unique.Make) and
// slices trimmed to their length. unique keeps its canonical copy only while a handle to it
// lives, and the cache keeps the strings, not the handles: after a garbage collection the
// next pipeline decoded makes a new canonical copy, which those after it share. A string
// is stored once per collection cycle, not once per pipeline, and nothing a tenant wrote
// outlives the objects that hold it.
// Names, UIDs and resourceVersions, unique to each object, are left alone.
//
// The objects of the cache are shared and never written to (the engine works on deep
// copies), so sharing a string between them is safe.
func compactPipeline(p *v1alpha1.Pipeline) {
	p.APIVersion, p.Kind = intern(p.APIVersion), intern(p.Kind)
	compactMeta(&p.ObjectMeta)
	compactSpec(&p.Spec)
	compactStatus(&p.Status)
}

func compactMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.GenerateName = intern(m.GenerateName)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	m.Finalizers = internSlice(m.Finalizers)
	m.OwnerReferences = exact(m.OwnerReferences)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
	}
}

func compactSpec(s *v1alpha1.PipelineSpec) {
	s.ServiceAccountName = intern(s.ServiceAccountName)
	s.Params = internMap(s.Params)
	s.UpdatePolicy = intern(s.UpdatePolicy)
	s.OnFailure = intern(s.OnFailure)
	if s.TemplateRef != nil {
		s.TemplateRef.Name = intern(s.TemplateRef.Name)
	}
	s.Steps = compactSpecSteps(s.Steps)
}

func compactSpecSteps(steps []v1alpha1.Step) []v1alpha1.Step {
	steps = exact(steps)
	for i := range steps {
		st := &steps[i]
		st.Name, st.Executor = intern(st.Name), intern(st.Executor)
		st.With = internMap(st.With)
	}
	return steps
}

func compactStatus(s *v1alpha1.PipelineStatus) {
	s.SpecHash = intern(s.SpecHash)
	s.RefusedSpecHash = intern(s.RefusedSpecHash)
	s.Phase = intern(s.Phase)
	s.CurrentStep = intern(s.CurrentStep)
	s.Progress = intern(s.Progress)
	s.Conditions = compactConditions(s.Conditions)
	s.BlockedBy = exact(s.BlockedBy)
	for i := range s.BlockedBy {
		b := &s.BlockedBy[i]
		b.Kind, b.Namespace, b.Name, b.Step, b.Unblock = intern(b.Kind), intern(b.Namespace), intern(b.Name), intern(b.Step), intern(b.Unblock)
	}
	s.Steps = compactSteps(s.Steps)
	s.RetiredSteps = compactSteps(s.RetiredSteps)
	if t := s.Template; t != nil {
		t.Name, t.UID = intern(t.Name), intern(t.UID)
		t.Params = internMap(t.Params)
		t.Steps = compactSpecSteps(t.Steps)
	}
	if f := s.Failure; f != nil {
		f.Step, f.Message, f.Teardown = intern(f.Step), intern(f.Message), intern(f.Teardown)
	}
}

func compactSteps(steps []v1alpha1.StepStatus) []v1alpha1.StepStatus {
	steps = exact(steps)
	for i := range steps {
		s := &steps[i]
		s.Name, s.Executor, s.Phase, s.Hook = intern(s.Name), intern(s.Executor), intern(s.Phase), intern(s.Hook)
		s.Message, s.Reason = intern(s.Message), intern(s.Reason)
		s.Outputs = internMap(s.Outputs)
		s.HookState = internMap(s.HookState)
		s.Created = internMap(s.Created)
		s.Conditions = compactConditions(s.Conditions)
		s.BlockedBy = exact(s.BlockedBy)
		for j := range s.BlockedBy {
			b := &s.BlockedBy[j]
			b.Kind, b.Namespace, b.Name = intern(b.Kind), intern(b.Namespace), intern(b.Name)
		}
		if r := s.Ran; r != nil {
			r.Executor, r.StepHash = intern(r.Executor), intern(r.StepHash)
			r.Params = internMap(r.Params)
		}
	}
	return steps
}

func compactConditions(conditions []metav1.Condition) []metav1.Condition {
	conditions = exact(conditions)
	for i := range conditions {
		c := &conditions[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), intern(c.Status), intern(c.Reason), intern(c.Message)
	}
	return conditions
}

// intern returns the canonical copy of s.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// internSlice interns the strings of s, in a slice of its own length.
func internSlice(s []string) []string {
	s = exact(s)
	for i := range s {
		s[i] = intern(s[i])
	}
	return s
}

// internMap interns the keys and values of m; a map is rebuilt only when it holds
// something, since a Go map cannot give its keys back to be replaced in place.
func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

// exact returns s in an array of its own length: decoding grows slices by doubling, and
// a cached object keeps the spare capacity for as long as it is cached.
func exact[S ~[]E, E any](s S) S {
	if len(s) == cap(s) {
		return s
	}
	out := make(S, len(s))
	copy(out, s)
	return out
}
