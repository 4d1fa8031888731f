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

{{/* Fails the rendering on archive values that cannot work: an archive with no database
to write to, two databases, a bundled PostgreSQL for no archive, or a certificate of the
history API that nothing verifies. */}}
{{- define "stepwise.archiveChecks" -}}
{{- $a := .Values.archive -}}
{{- if $a.enabled -}}
{{- if and $a.dsnSecret.name $a.postgresql.deploy -}}
{{- fail (printf "archive: archive.dsnSecret.name (%s) and archive.postgresql.deploy name two databases: keep one (the bundled PostgreSQL makes its own Secret, stepwise-archive-dsn)" $a.dsnSecret.name) -}}
{{- end -}}
{{- if not (or $a.dsnSecret.name $a.postgresql.deploy) -}}
{{- fail "archive: archive.enabled needs the PostgreSQL connection string: set archive.dsnSecret.name to a Secret of the release's namespace holding it (under archive.dsnSecret.key, \"dsn\" by default), or archive.postgresql.deploy=true for a bundled PostgreSQL to try it (not for production)" -}}
{{- end -}}
{{- if $a.history.enabled -}}
{{- $injected := false -}}
{{- range $k, $_ := $a.history.apiServiceAnnotations -}}
{{- if hasPrefix "cert-manager.io/inject-ca-from" $k -}}{{- $injected = true -}}{{- end -}}
{{- end -}}
{{- if and $a.history.tls.secretName (not $a.history.tls.caBundle) (not $injected) -}}
{{- fail (printf "archive: archive.history.tls.secretName (%s) needs the CA that signed its certificate: archive.history.tls.caBundle, or cert-manager's annotation cert-manager.io/inject-ca-from in archive.history.apiServiceAnnotations; the API server verifies the history API against it" $a.history.tls.secretName) -}}
{{- end -}}
{{- if and $a.history.tls.caBundle (not $a.history.tls.secretName) -}}
{{- fail "archive: archive.history.tls.caBundle is the CA of your own certificate: name its Secret in archive.history.tls.secretName, or leave both empty for the chart's" -}}
{{- end -}}
{{- end -}}
{{- else if $a.postgresql.deploy -}}
{{- fail "archive: archive.postgresql.deploy is the archive's database: set archive.enabled=true with it" -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the archive's connection string: the installer's, or the one made
for the bundled PostgreSQL. */}}
{{- define "stepwise.archiveDSNSecretName" -}}
{{- if .Values.archive.postgresql.deploy -}}
stepwise-archive-dsn
{{- else -}}
{{ .Values.archive.dsnSecret.name }}
{{- end -}}
{{- end -}}

{{/* The key of that Secret holding the connection string. */}}
{{- define "stepwise.archiveDSNSecretKey" -}}
{{- if .Values.archive.postgresql.deploy -}}
dsn
{{- else -}}
{{ .Values.archive.dsnSecret.key | default "dsn" }}
{{- end -}}
{{- end -}}

{{/* The Secret of the history API's serving certificate: the installer's, or the chart's. */}}
{{- define "stepwise.historyTLSSecretName" -}}
{{ .Values.archive.history.tls.secretName | default "stepwise-operator-history-tls" }}
{{- end -}}
