package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// takeTemplate gives a pipeline with a templateRef its steps and params. A run keeps the
// template as the pipeline found it when the run started (status.template): editing or
// deleting the template changes nothing of it. A new run (the first, or a new spec under
// updatePolicy Rerun) takes the template as it is now; when the template is gone, a
// re-run keeps the steps it had. It reports false, with the status saying why, when the
// pipeline cannot run: its template does not exist yet (it starts once it appears) or its
// params do not fit the template.
func (ps *pipelineSync) takeTemplate(newRun bool) bool {
	ref := ps.p.Spec.TemplateRef
	snap := ps.status.Template
	if snap != nil && snap.Name == ref.Name && !newRun {
		return true
	}
	var tpl *v1alpha1.PipelineTemplate
	if ps.env.templates != nil {
		got, err := ps.env.templates.PipelineTemplates(ps.p.Namespace).Get(ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			ps.waitForTemplate(fmt.Sprintf("reading template %s: %v", ref.Name, err))
			return false
		}
		tpl = got
	}
	if tpl != nil && ps.env.undecodableTemplates != nil {
		if decodeErr := ps.env.undecodableTemplates.Err(tpl); decodeErr != nil {
			ps.hold(v1alpha1.PipelinePending, v1alpha1.ReasonUndecodable, fmt.Sprintf(
				"template %s cannot be decoded (%v); the pipeline starts once the template is fixed", ref.Name, decodeErr))
			return false
		}
	}
	if tpl == nil {
		if snap == nil || snap.Name != ref.Name {
			ps.waitForTemplate(fmt.Sprintf("template %s does not exist in namespace %s; the pipeline starts once it does", ref.Name, ps.p.Namespace))
			return false
		}
		// Gone since the last run: run again with the steps that run had.
		tpl = &v1alpha1.PipelineTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: snap.Name, UID: "", Generation: snap.Generation},
			Spec:       v1alpha1.PipelineTemplateSpec{Steps: snap.Steps, OnFailure: snap.OnFailure},
		}
		for k := range snap.Params {
			tpl.Spec.Params = append(tpl.Spec.Params, v1alpha1.TemplateParam{Name: k})
		}
	}
	params, err := bindParams(tpl.Spec.Params, ps.p.Spec.Params)
	if err != nil {
		ps.hold(v1alpha1.PipelineFailed, v1alpha1.ReasonInvalidParameters, fmt.Sprintf("template %s: %v", ref.Name, err))
		return false
	}
	snap = &v1alpha1.TemplateSnapshot{
		Name: tpl.Name, UID: string(tpl.UID), Generation: tpl.Generation,
		Params: params, OnFailure: tpl.Spec.OnFailure, Steps: tpl.Spec.Steps, Retention: tpl.Spec.Retention.DeepCopy(),
	}
	if tpl.UID != "" {
		ps.recordAuthors(snap, tpl, nil)
	} else {
		ps.recordAuthors(snap, nil, ps.status.Template) // gone: the last run's copy
	}
	// The copy is never shed from the status (the run needs it): a pipeline it would make
	// too large to store fails now, before a hook runs whose status could not be written.
	if size, err := ps.sizeWithTemplate(snap); err != nil || size > maxObjectBytes {
		ps.hold(v1alpha1.PipelineFailed, v1alpha1.ReasonTemplateTooLarge, fmt.Sprintf(
			"template %s: its steps and the params, which the status keeps for the run, would make the pipeline %d bytes, over the %d it may have: make the template or its params smaller",
			ref.Name, size, maxObjectBytes))
		return false
	}
	ps.status.Template = snap
	ps.steps, ps.params = tpl.Spec.Steps, params
	ps.alignSteps()
	return true
}

// sizeWithTemplate is the size of the pipeline as a status write would send it, with snap
// as its status.template.
func (ps *pipelineSync) sizeWithTemplate(snap *v1alpha1.TemplateSnapshot) (int, error) {
	p := ps.p.DeepCopy()
	p.Status = *ps.status.DeepCopy()
	p.Status.Template = snap
	return jsonSize(p)
}

func (ps *pipelineSync) waitForTemplate(why string) {
	ps.hold(v1alpha1.PipelinePending, v1alpha1.ReasonTemplateNotFound, why)
}

// bindParams is given with the template's defaults filled in; an unknown name or a
// required parameter missing is an error naming every one of them.
func bindParams(declared []v1alpha1.TemplateParam, given map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(declared))
	known := make(map[string]bool, len(declared))
	var missing []string
	for _, d := range declared {
		known[d.Name] = true
		switch v, ok := given[d.Name]; {
		case ok:
			out[d.Name] = v
		case d.Default != nil:
			out[d.Name] = *d.Default
		case d.Required:
			missing = append(missing, d.Name)
		}
	}
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("required parameters not given: %s", strings.Join(missing, ", ")))
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("parameters the template does not declare: %s", strings.Join(unknown, ", ")))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
