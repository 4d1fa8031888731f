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
{{- if .sha256 -}}
{{ .sha256 }}  stepwise-plugin-{{ .name }}
{{ end -}}
{{- end -}}
{{- end -}}

{{/* Who must have signed each installed plugin, by name (--installed-plugin-policies):
its public key, or its keyless identity and issuer. */}}
{{- define "stepwise.installedPluginPolicies" -}}
{{- $out := dict -}}
{{- range $plugin := .Values.plugins -}}
{{- with $plugin.signature -}}
{{- $_ := set $out $plugin.name (pick . "publicKey" "identity" "issuer") -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Fails the rendering when a plugin's image is not pinned by digest (a tag can be
re-pushed with other code) unless its values accept that in so many words. */}}
{{- define "stepwise.pinnedPluginImages" -}}
{{- range .Values.plugins -}}
{{- if and (not (contains "@sha256:" .image)) (ne (.unpinnedImage | default "") "I accept that the tag may move to another build") -}}
{{- fail (printf "plugins: the image of plugin %s, %s, is not pinned by digest (IMAGE@sha256:...): a tag can move to another build (one its signature policy refuses, or a newer signed one). Pin it, or set plugins[].unpinnedImage to \"I accept that the tag may move to another build\"" .name .image) -}}
{{- end -}}
{{- if not (or .sha256 .signature) -}}
{{- fail (printf "plugins: plugin %s needs a signature policy (signature.publicKey, or signature.identity and signature.issuer) or its sha256" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The resources and security context of the init containers that copy plugins out of their
images: they run stepwise-copy only, with no token (the Pod mounts none; the operator's
container has its own, projected).
*/}}
{{- define "stepwise.pluginCopyContainer" -}}
resources:
  requests:
    cpu: 10m
    memory: 16Mi
  limits:
    memory: 64Mi
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}
