{{/* Labels every object of the chart carries: part-of is also what kustomize puts on
deploy/'s objects, the others are Helm's own. */}}
{{- define "stepwise.labels" -}}
app.kubernetes.io/part-of: stepwise
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The operator's image: by digest when one is given, else by tag. */}}
{{- define "stepwise.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The kinds triggers may watch, as --trigger-resources spells them: resource.group. */}}
{{- define "stepwise.triggerResources" -}}
{{- $out := list -}}
{{- range .Values.triggerResources -}}
{{- if .group -}}
{{- $out = append $out (printf "%s.%s" .resource .group) -}}
{{- else -}}
{{- $out = append $out .resource -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}


{{/* The installed plugins' SHA256SUMS, from the values: what the operator checks each
binary against. */}}
{{- define "stepwise.installedPluginSums" -}}
{{- range .Values.plugins -}}
{{ .sha256 }}  stepwise-plugin-{{ .name }}
{{ end -}}
{{- end -}}
